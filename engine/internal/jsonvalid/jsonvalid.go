// Package jsonvalid checks that bytes are one JSON value in valid UTF-8,
// in one pass: what the engine asks of every payload, result and value it
// is given. It is pure: no state, no I/O.
package jsonvalid

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// Valid reports whether b is one valid JSON value of valid UTF-8: what
// encoding/json.Valid(b) && utf8.Valid(b) says (the same grammar, nesting
// deeper than 10,000 refused, and, unlike encoding/json alone, invalid UTF-8
// inside strings refused: RFC 8259 requires UTF-8, and a payload is sent
// back inside JSON answers), but in one pass without the per-byte
// state-machine calls of encoding/json's scanner. FuzzValidJSON checks they
// agree.
func Valid(b []byte) bool {
	const maxDepth = 10000 // encoding/json's maxNestingDepth
	// stack holds one bit per open container: 1 for an object, 0 for an
	// array; depth is how many are open. Every bit is written when its
	// container opens, so the words need no clearing, and a value nested
	// deeper than 128 grows the stack (zeroing a stack for the deepest
	// value allowed was a tenth of a small payload's check).
	var small [2]uint64
	stack := small[:]
	depth := 0
	i := skipSpace(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if depth >= maxDepth {
				return false
			}
			if depth/64 == len(stack) {
				stack = append(stack, 0)
			}
			if c == '{' {
				stack[depth/64] |= 1 << (depth % 64)
			} else {
				stack[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			i = skipSpace(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				depth--
				i++
				break
			}
			if c == '{' {
				if i = objectKey(b, i); i < 0 {
					return false
				}
			}
			continue // the first element
		case c == '"':
			if i = stringEnd(b, i); i < 0 {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = numberEnd(b, i); i < 0 {
				return false
			}
		case c == 't':
			if i = literal(b, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = literal(b, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = literal(b, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// A value ended before i: close containers, or go on to the next
		// element.
		for {
			i = skipSpace(b, i)
			if depth == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			object := stack[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			c := b[i]
			if c == ',' {
				i = skipSpace(b, i+1)
				if object {
					if i = objectKey(b, i); i < 0 {
						return false
					}
				}
				break
			}
			if object && c == '}' || !object && c == ']' {
				depth--
				i++
				continue
			}
			return false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// objectKey reads `"key" :` at i and returns the index after the colon and
// any space, or -1.
func objectKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = stringEnd(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// stringEnd returns the index after the string that opens at i, or -1.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		// Eight bytes at a time, to the first that ends the string, starts
		// an escape, is a control character or is not ASCII.
		for i+8 <= len(b) {
			if m := special8(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		case c < 0x20:
			return -1
		case c >= utf8.RuneSelf:
			// Outside strings the grammar allows only ASCII, so checking
			// here is checking all of b.
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return -1
			}
			i += size - 1
		}
	}
	return -1
}

// special8 marks the bytes of w (little-endian) that are '"', '\\',
// below 0x20 or at least 0x80 with their high bit, exactly up to the first
// of them (bytes after it may be marked too): (x - 0x01…) & ^x & 0x80…
// marks the zero bytes of x, (w - 0x20…) & ^w & 0x80… the bytes of w below
// 0x20, each exactly until a borrow from a marked byte reaches the ones
// above it, and w & 0x80… the bytes with their high bit set.
func special8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	return ((q-ones)&^q | (bs-ones)&^bs | (w-ones*0x20)&^w | w) & highs
}

// numberEnd returns the index after the number that starts at i, or -1.
func numberEnd(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
