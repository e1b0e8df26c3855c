package engine

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

	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/internal/index"
)

// UniquePrefix starts the idempotency keys derived from content. The// checkUnique validates t's Unique and fills in the spec's derived key,
// states and window.
func checkUnique(t *Task, s *spec) error {
	u := t.Unique
	if t.IdempotencyKey != "" {
		return invalid("a task is unique by content or has an idempotency key, not both")
	}
	if err := checkDuration("unique window", u.Window, false); err != nil {
		return err
	}
	if u.Window < time.Microsecond {
		return invalid("unique window %v is under a microsecond", u.Window)
	}
	if len(u.States) > index.NumStates-1 {
		return invalid("%d unique states: there are %d", len(u.States), index.NumStates-1)
	}
	mask := uint8(machine.UniqueDefault)
	if len(u.States) > 0 {
		mask = 0
		for _, st := range u.States {
			if !index.TaskState(st).Valid() {
				return invalid("unique state %d", st)
			}
			if st != Waiting { // blocks anyway (see blocks)
				mask |= 1 << st
			}
		}
		if err := machine.CheckUniqueStates(mask); err != nil {
			return err
		}
	}
	key, err := UniqueKey(t.Kind, t.Payload)
	if err != nil {
		return err
	}
	s.Idem, s.Uniq, s.Window = key, mask, u.Window.Microseconds()
	return nil
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
