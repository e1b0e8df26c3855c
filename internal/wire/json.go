package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// JSON codec names: connect picks a codec by the request's content type,
// application/json or application/json; charset=utf-8.
const (
	JSONName        = "json"
	JSONCharsetName = "json; charset=utf-8"
)

// JSONCodec is connect's protojson codec with one difference: a bytes field
// marked raw_json in the schema (payloads, progress, results) is written
// as the JSON value it holds, and read from one, instead of as a base64
// string. The value's text is kept byte for byte, so big integers keep
// their digits. Unknown fields are ignored, as connect's own codec does.
type JSONCodec struct {
	name  string
	limit bool
	// MaxValueBytes, if positive, bounds every bytes field of a request
	// a server's codec reads (a payload, result or progress record as its
	// JSON text, a KV value once decoded from base64): the engine's
	// payload limit, as ProtoCodec's.
	MaxValueBytes int
}

// NewJSONCodec returns the codec under name (JSONName or JSONCharsetName).
// With limit (a server's codec) Unmarshal refuses a message holding more
// elements than the engine accepts (see CheckProto) before building it.
func NewJSONCodec(name string, limit bool) *JSONCodec { return &JSONCodec{name: name, limit: limit} }

var _ connect.Codec = (*JSONCodec)(nil)

// Name implements connect.Codec.
func (c *JSONCodec) Name() string { return c.name }

// IsBinary tells connect the codec is text (for GET requests).
func (c *JSONCodec) IsBinary() bool { return false }

// Marshal implements connect.Codec.
func (c *JSONCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", m)
	}
	b, err := protojson.Marshal(pm)
	if err != nil {
		return nil, err
	}
	md := pm.ProtoReflect().Descriptor()
	if !hasRaw(md) {
		return b, nil
	}
	return rewrite(b, md, false, false, 0)
}

// MarshalStable implements connect's stable codec (for GET requests).
func (c *JSONCodec) MarshalStable(m any) ([]byte, error) {
	b, err := c.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Unmarshal implements connect.Codec.
func (c *JSONCodec) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", m)
	}
	if len(b) == 0 {
		return errors.New("zero-length payload is not a valid JSON object")
	}
	md := pm.ProtoReflect().Descriptor()
	if c.limit && c.MaxValueBytes > 0 {
		// Before the rewrite, which holds a value it reads several times
		// over (the decoder's buffer, the value, the text it writes).
		if n, max := longestString(b), jsonStringBound(c.MaxValueBytes); n > max {
			return fmt.Errorf("unmarshal into %T: a JSON string of %d bytes, over the longest a request may hold (%d)", m, n, max)
		}
	}
	if c.limit || hasRaw(md) {
		// The rewritten request is done with once it is decoded (protojson
		// copies what it keeps): its buffer serves the next request.
		out := requestBufs.Get().(*bytes.Buffer)
		defer func() {
			if out.Cap() <= maxPooledRequest {
				out.Reset()
				requestBufs.Put(out)
			}
		}()
		var err error
		if b, err = rewriteInto(out, b, md, true, c.limit, c.MaxValueBytes); err != nil {
			// Not wrapped: connect takes an io.EOF from a codec for "no
			// message", where this is a message cut short.
			return fmt.Errorf("unmarshal into %T: %s", m, err.Error())
		}
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, pm); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", m, err)
	}
	return nil
}

// requestBufs holds the buffers a server's JSON codec rewrites requests
// into, up to maxPooledRequest each (a request at the default request
// limit fits): a request's text is rewritten whole, and a new buffer for
// each large one was a new allocation of a third more than its size.
var requestBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledRequest = 16 << 20

// jsonStringBound is the longest text a JSON string of a request may have
// between its quotes, escapes as written, with the payload limit
// maxValue: a string field's MaxStringBytes, each byte escaped in six
// (\u0001), or a value's base64 with every character escaped in two (a
// payload's strings are within its own text, at most maxValue).
func jsonStringBound(maxValue int) int {
	return max(6*MaxStringBytes, 2*base64.StdEncoding.EncodedLen(maxValue))
}

// longestString returns the length of the longest JSON string in b, the
// text between its quotes as written (one left open runs to the end of
// b). It reads b once, allocating nothing, to refuse a request holding a
// string no field may hold before anything is built from it.
func longestString(b []byte) int {
	longest := 0
	for {
		q := bytes.IndexByte(b, '"')
		if q < 0 {
			return longest
		}
		b = b[q+1:]
		n := 0 // the string's text so far
		for {
			e := bytes.IndexByte(b[n:], '"')
			if e < 0 {
				return max(longest, len(b))
			}
			if k := bytes.IndexByte(b[n:n+e], '\\'); k >= 0 {
				n += k + 2 // an escape: its next byte is not the string's end
				if n > len(b) {
					return max(longest, len(b))
				}
				continue
			}
			n += e
			break
		}
		longest = max(longest, n)
		b = b[n+1:]
	}
}

// valueLen returns the length of the JSON value b starts with, after
// whitespace and a colon, reading it in place: a string to its closing
// quote, an object or array to the bracket that closes it (brackets in its
// strings skipped), anything else to the next comma, bracket or space.
// Malformed text is measured all the same, for the decoder to refuse.
func valueLen(b []byte) int {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r' || b[i] == ':') {
		i++
	}
	start, depth := i, 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return min(i+1, len(b)) - start
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i - start
			}
			if depth--; depth == 0 {
				return i + 1 - start
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i - start
			}
		}
	}
	return len(b) - start
}

// NotJSONError is the JSON codec's refusal to write a raw_json field whose
// bytes are not JSON (a client sending a payload the engine would refuse):
// it is the engine's ErrInvalid, in the engine's words.
type NotJSONError struct{ Field string }

func (e *NotJSONError) Error() string {
	return engine.ErrInvalid.Error() + ": " + e.Field + " is not valid JSON"
}

// Unwrap returns engine.ErrInvalid.
func (e *NotJSONError) Unwrap() error { return engine.ErrInvalid }

// isRaw reports a field marked raw_json.
func isRaw(fd protoreflect.FieldDescriptor) bool {
	if fd.Kind() != protoreflect.BytesKind || fd.IsList() || fd.IsMap() {
		return false
	}
	opts := fd.Options()
	return opts != nil && proto.GetExtension(opts, v1.E_RawJson).(bool)
}

var rawCache sync.Map // protoreflect.FullName -> bool

// hasRaw reports whether messages of md hold a raw_json field, at any depth.
func hasRaw(md protoreflect.MessageDescriptor) bool {
	if v, ok := rawCache.Load(md.FullName()); ok {
		return v.(bool)
	}
	v := findRaw(md, map[protoreflect.FullName]bool{})
	rawCache.Store(md.FullName(), v)
	return v
}

func findRaw(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if isRaw(fd) {
			return true
		}
		if sub := messageOf(fd); sub != nil && findRaw(sub, seen) {
			return true
		}
	}
	return false
}

// messageOf returns the message type a field's JSON value (or each element
// or map value of it) holds, nil for scalars and well-known types (which
// have JSON forms of their own).
func messageOf(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		fd = fd.MapValue()
	}
	md := fd.Message()
	if md == nil || md.ParentFile().Package() == "google.protobuf" {
		return nil
	}
	return md
}

// maxDepth bounds the nesting of messages the rewrite follows; docket's
// schema nests five deep at most.
const maxDepth = 32

// rewrite translates the raw_json fields of a JSON message of type md:
// toWire turns each JSON value into the base64 string protojson reads,
// !toWire turns protojson's base64 strings back into the JSON they hold.
// Everything else is copied as it is. With limit, every message is walked
// and its lists and maps counted against the engine's limits.
func rewrite(b []byte, md protoreflect.MessageDescriptor, toWire, limit bool, maxValue int) ([]byte, error) {
	return rewriteInto(new(bytes.Buffer), b, md, toWire, limit, maxValue)
}

// rewriteInto is rewrite writing into out, which it grows.
func rewriteInto(out *bytes.Buffer, b []byte, md protoreflect.MessageDescriptor, toWire, limit bool, maxValue int) ([]byte, error) {
	r := &rewriter{dec: json.NewDecoder(bytes.NewReader(b)), src: b, out: out, toWire: toWire, limit: limit, maxValue: maxValue}
	r.out.Grow(len(b) + len(b)/3 + 16)
	if err := r.message(md, 0); err != nil {
		return nil, err
	}
	if _, err := r.dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON object")
	}
	return r.out.Bytes(), nil
}

type rewriter struct {
	dec      *json.Decoder
	src      []byte // what dec reads
	out      *bytes.Buffer
	toWire   bool
	limit    bool
	maxValue int // with limit: a bytes field's bound, 0 for none
}

// message rewrites one JSON object of type md (or null).
func (r *rewriter) message(md protoreflect.MessageDescriptor, depth int) error {
	if depth > maxDepth {
		return errors.New("JSON nested too deep")
	}
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		r.out.WriteString("null")
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("%s: want a JSON object", md.FullName())
	}
	r.out.WriteByte('{')
	fields := md.Fields()
	first := true
	for r.dec.More() {
		tok, err := r.dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%s: want a field name", md.FullName())
		}
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByTextName(key)
		}
		if fd != nil && isRaw(fd) {
			if r.limit && r.maxValue > 0 {
				// Measured in place before the decoder reads it: it would
				// hold the value in its buffer and again as raw.
				if n := valueLen(r.src[min(int(r.dec.InputOffset()), len(r.src)):]); n > r.maxValue {
					return valueTooLong(fd, n, r.maxValue)
				}
			}
			var raw json.RawMessage
			if err := r.dec.Decode(&raw); err != nil {
				return err
			}
			val, keep, err := r.raw(fd, raw)
			if err != nil {
				return err
			}
			if keep {
				r.key(key, &first)
				r.out.Write(val)
			}
			continue
		}
		r.key(key, &first)
		sub := (protoreflect.MessageDescriptor)(nil)
		if fd != nil {
			if sub = messageOf(fd); sub != nil && !r.limit && !hasRaw(sub) {
				sub = nil
			}
		}
		switch {
		case fd != nil && r.limit && sub == nil && (fd.IsList() || fd.IsMap()):
			err = r.count(fd)
		case sub == nil && fd != nil && r.limit && fd.Kind() == protoreflect.StringKind:
			err = r.copyString(fd)
		case sub == nil && fd != nil && r.limit && r.maxValue > 0 && fd.Kind() == protoreflect.BytesKind && !fd.IsList():
			err = r.copyBytes(fd)
		case sub == nil:
			err = r.copy()
		case fd.IsMap():
			err = r.each(fd, '{', '}', func() error {
				tok, err := r.dec.Token()
				if err != nil {
					return err
				}
				k, ok := tok.(string)
				if !ok {
					return fmt.Errorf("%s: want a map key", fd.FullName())
				}
				kb, _ := json.Marshal(k)
				r.out.Write(kb)
				r.out.WriteByte(':')
				return r.message(sub, depth+1)
			})
		case fd.IsList():
			err = r.each(fd, '[', ']', func() error { return r.message(sub, depth+1) })
		default:
			err = r.message(sub, depth+1)
		}
		if err != nil {
			return err
		}
	}
	if _, err := r.dec.Token(); err != nil { // the closing brace
		return err
	}
	r.out.WriteByte('}')
	return nil
}

// raw translates the value of a raw_json field; keep is false for a field
// to leave out.
func (r *rewriter) raw(fd protoreflect.FieldDescriptor, raw json.RawMessage) (val []byte, keep bool, err error) {
	raw = bytes.TrimSpace(raw) // with limit, valueLen held it to maxValue before it was read
	if r.toWire {
		enc := make([]byte, base64.StdEncoding.EncodedLen(len(raw))+2)
		enc[0] = '"'
		base64.StdEncoding.Encode(enc[1:], raw)
		enc[len(enc)-1] = '"'
		return enc, true, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false, fmt.Errorf("%s: want a base64 string", fd.FullName())
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", fd.FullName(), err)
	}
	if len(b) == 0 {
		return nil, false, nil
	}
	if !json.Valid(b) {
		return nil, false, &NotJSONError{Field: string(fd.Name())}
	}
	return b, true, nil
}

func (r *rewriter) key(k string, first *bool) {
	if !*first {
		r.out.WriteByte(',')
	}
	*first = false
	kb, _ := json.Marshal(k)
	r.out.Write(kb)
	r.out.WriteByte(':')
}

// each rewrites an array or object (or null) calling elem for each element.
func (r *rewriter) each(fd protoreflect.FieldDescriptor, open, close json.Delim, elem func() error) error {
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		r.out.WriteString("null")
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != open {
		return fmt.Errorf("want %c", open)
	}
	r.out.WriteByte(byte(open))
	for i := 0; r.dec.More(); i++ {
		if r.limit && i >= elementLimit(fd) {
			return overLimit(fd)
		}
		if i > 0 {
			r.out.WriteByte(',')
		}
		if err := elem(); err != nil {
			return err
		}
	}
	if _, err := r.dec.Token(); err != nil {
		return err
	}
	r.out.WriteByte(byte(close))
	return nil
}

// count copies a list or map of scalars (or null), refusing one with more
// elements than the limit.
func (r *rewriter) count(fd protoreflect.FieldDescriptor) error {
	if fd.IsMap() {
		return r.each(fd, '{', '}', func() error {
			tok, err := r.dec.Token()
			if err != nil {
				return err
			}
			k, ok := tok.(string)
			if !ok {
				return fmt.Errorf("%s: want a map key", fd.FullName())
			}
			if len(k) > MaxStringBytes && fd.MapKey().Kind() == protoreflect.StringKind {
				return stringTooLong(fd.MapKey(), len(k))
			}
			kb, _ := json.Marshal(tok)
			r.out.Write(kb)
			r.out.WriteByte(':')
			if fd.MapValue().Kind() == protoreflect.StringKind {
				return r.copyString(fd.MapValue())
			}
			return r.copy()
		})
	}
	if fd.Kind() == protoreflect.StringKind {
		return r.each(fd, '[', ']', func() error { return r.copyString(fd) })
	}
	return r.each(fd, '[', ']', r.copy)
}

// copyString copies the next JSON value, a string of field fd, refusing
// one longer than MaxStringBytes once unescaped (as CheckProto does its
// bytes).
func (r *rewriter) copyString(fd protoreflect.FieldDescriptor) error {
	return r.copyHeld(MaxStringBytes, func(s string) error {
		if len(s) > MaxStringBytes {
			return stringTooLong(fd, len(s))
		}
		return nil
	})
}

// copyBytes copies the next JSON value, the base64 text of bytes field fd,
// refusing one that decodes to more than maxValue bytes (as CheckRequest
// does the bytes themselves).
func (r *rewriter) copyBytes(fd protoreflect.FieldDescriptor) error {
	return r.copyHeld(r.maxValue, func(s string) error {
		// Standard or URL alphabet, padded or not, as protojson takes.
		if n := len(strings.TrimRight(s, "=")) * 3 / 4; n > r.maxValue {
			return valueTooLong(fd, n, r.maxValue)
		}
		return nil
	})
}

// copyHeld copies the next JSON value, a string, after check has seen it
// unescaped when its text is longer than max: escapes and base64 only
// lengthen what they write, so text within max (with its quotes) holds
// at most max bytes. A value that is not a string is copied for protojson
// to refuse.
func (r *rewriter) copyHeld(max int, check func(s string) error) error {
	var raw json.RawMessage
	if err := r.dec.Decode(&raw); err != nil {
		return err
	}
	if len(raw) > max+2 {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if err := check(s); err != nil {
				return err
			}
		}
	}
	r.out.Write(raw)
	return nil
}

// copy copies the next JSON value as it is.
func (r *rewriter) copy() error {
	var raw json.RawMessage
	if err := r.dec.Decode(&raw); err != nil {
		return err
	}
	r.out.Write(raw)
	return nil
}
