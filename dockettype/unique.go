package dockettype

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Unique makes an enqueue unique by content (what River calls UniqueOpts
// with ByArgs and ByPeriod): within Window of a task's enqueue, enqueueing
// a task of the same kind with the same payload on the same queue, while
// the first is in one of States, enqueues nothing and returns the first
// task's id with Deduplicated set, as a duplicate idempotency key does.
// It is that machinery: the key is derived from the content and kept with
// the states and the window's end.
//
// Content is the task's Kind and its payload in canonical JSON: object
// members sorted by key (compared as UTF-8 bytes, duplicate keys kept in
// their order), no whitespace outside strings, strings written with the
// fewest escapes (only ", \ and control characters are escaped; \n, \r,
// \t, \b and \f by name, others as \u00XX; invalid UTF-8 reads as U+FFFD),
// numbers, true, false and null exactly as written (1 and 1.0 differ). So
// {"b": [1, 2], "a": "\u00e9"} and {"a":"é","b":[1,2]} are the same
// content. The key is "docket/unique/" and the hex SHA-256 of the kind, a
// NUL byte, and the canonical payload; TaskInfo.IdempotencyKey shows it.
//
// A task cannot have both Unique and an IdempotencyKey.
type Unique struct {
	// Window is how long after a task's enqueue its content blocks another
	// enqueue of the same content. Required: at least a microsecond, at
	// most MaxDuration.
	Window time.Duration
	// States are the states in which the existing task blocks it. They
	// must include Ready, Scheduled and InFlight (a task waiting or running
	// always blocks); Dead and Completed are optional. A task Waiting for
	// the tasks it depends on always blocks too, whether or not States
	// names Waiting (naming it changes nothing). A completed task blocks
	// for the rest of the window even once it is deleted (with
	// RetainCompleted off). A cancelled task never blocks, nor does one
	// cancelled because a task it depended on failed. None (nil or empty)
	// means Ready, Scheduled, InFlight and Completed (and Waiting).
	//
	// A unique task may have dependencies. A duplicate is deduplicated into
	// the first task whatever its own dependencies, which are then ignored
	// (as with an idempotency key): the first task keeps the dependencies
	// it was enqueued with.
	States []State
}

// UniqueKey returns the idempotency key Unique derives from a task's kind
// and payload (see Unique for the canonical form). The payload must be
// empty or valid JSON.
func UniqueKey(kind string, payload []byte) (string, error) {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	if len(payload) > 0 {
		c, err := CanonicalJSON(payload)
		if err != nil {
			return "", err
		}
		h.Write(c)
	}
	return UniquePrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// CanonicalJSON returns the canonical form of the JSON value b that
// unique-by-content keys are derived from (see Unique).
func CanonicalJSON(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out bytes.Buffer
	out.Grow(len(b))
	if err := canonical(&out, dec); err != nil {
		return nil, invalid("payload is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("payload holds more than one JSON value")
	}
	return out.Bytes(), nil
}

// canonical writes the next value of dec to out in canonical form.
func canonical(out *bytes.Buffer, dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '[':
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := canonical(out, dec); err != nil {
					return err
				}
			}
			out.WriteByte(']')
		case '{':
			type member struct {
				key string
				val []byte
			}
			var members []member
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key, ok := k.(string)
				if !ok {
					return fmt.Errorf("object key %v", k)
				}
				var val bytes.Buffer
				if err := canonical(&val, dec); err != nil {
					return err
				}
				members = append(members, member{key, val.Bytes()})
			}
			slices.SortStableFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
			out.WriteByte('{')
			for i, m := range members {
				if i > 0 {
					out.WriteByte(',')
				}
				writeJSONString(out, m.key)
				out.WriteByte(':')
				out.Write(m.val)
			}
			out.WriteByte('}')
		default:
			return fmt.Errorf("unexpected %v", v)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
	case string:
		writeJSONString(out, v)
	case json.Number:
		out.WriteString(string(v))
	case bool:
		if v {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
	case nil:
		out.WriteString("null")
	}
	return nil
}

// writeJSONString writes s as a JSON string with the fewest escapes.
func writeJSONString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			out.WriteString(`\"`)
		case r == '\\':
			out.WriteString(`\\`)
		case r == '\n':
			out.WriteString(`\n`)
		case r == '\r':
			out.WriteString(`\r`)
		case r == '\t':
			out.WriteString(`\t`)
		case r == '\b':
			out.WriteString(`\b`)
		case r == '\f':
			out.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(out, `\u%04x`, r)
		default:
			out.WriteRune(r) // invalid UTF-8 was decoded as utf8.RuneError
		}
	}
	out.WriteByte('"')
}
