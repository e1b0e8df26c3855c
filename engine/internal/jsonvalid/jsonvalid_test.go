package jsonvalid

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// wantJSON is what Valid must say: valid JSON (encoding/json) of valid
// UTF-8, inside strings too, which encoding/json alone does not check.
func wantJSON(b []byte) bool { return json.Valid(b) && utf8.Valid(b) }

var jsonCases = []string{
	``, ` `, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-12.5e10`, `.5`, `+1`,
	`""`, `"a`, `"\""`, `"\u00e9"`, `"\u00g9"`, `"\u00e"`, `"\x"`, "\"\x01\"", "\"\xff\"", `"\/"`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `NaN`,
	`[]`, `[`, `]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, ` [ 1 , [ ] , { } ] `,
	`{}`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":1,"b":[true,null]}`, `{1:2}`,
	`{"a":1}}`, `[1]]`, `1 2`, `{"a":{"b":{"c":[[[]]]}}}`, "\t{\r\n}\n", `{"a":1]`, `[1}`,
	// UTF-8: valid runes of each length, and every way a sequence is not
	// UTF-8 (a stray continuation, a truncated rune, an overlong form, a
	// surrogate, past U+10FFFF), in values and in keys.
	`"é€😀"`, `{"ключ":"значение"}`, "\"\x80\"", "\"\xc3\"", "\"\xe2\x82\"", "\"\xf0\x9f\x98\"",
	"\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "{\"\xff\":1}", "[\"a\",\"\xfe\"]",
	"\"\xc3", "\xc3\xa9", "[\xc3\xa9]",
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	cases := append([]string{}, jsonCases...)
	cases = append(cases, strings.Repeat("[", 10000)+strings.Repeat("]", 10000),
		strings.Repeat("[", 10001)+strings.Repeat("]", 10001),
		strings.Repeat(`{"a":`, 10000)+"1"+strings.Repeat("}", 10000),
		strings.Repeat(`{"a":`, 10001)+"1"+strings.Repeat("}", 10001))
	// Each byte that a string's word-at-a-time scan must stop at, at every
	// offset around a word, and bytes it must not stop at.
	for _, special := range []string{`"`, `\\`, `\"`, `\u0041`, `\x`, "\x00", "\x1f", "\x20", "\x7f", "\x80", "\xff", "\\",
		"é", "€", "😀", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xed\xa0\x80", "é\xff", "😀😀"} {
		for off := range 18 {
			for tail := range 10 {
				cases = append(cases, `"`+strings.Repeat("a", off)+special+strings.Repeat("b", tail)+`"`,
					`["`+strings.Repeat("a", off)+special+strings.Repeat("b", tail))
			}
		}
	}
	// The stack of open containers grows by words of 64.
	for _, d := range []int{63, 64, 65, 127, 128, 129, 191, 192, 193} {
		for _, inner := range []string{"1", "[]", "{}"} {
			cases = append(cases, strings.Repeat("[", d)+inner+strings.Repeat("]", d),
				strings.Repeat(`{"k":[`, d/2)+inner+strings.Repeat("]}", d/2),
				strings.Repeat(`{"k":[`, d/2)+inner+strings.Repeat("}]", d/2), // closed in the wrong order
				strings.Repeat("[", d)+inner+strings.Repeat("]", d-1))
		}
	}
	for _, c := range cases {
		if got, want := Valid([]byte(c)), wantJSON([]byte(c)); got != want {
			t.Errorf("Valid(%.60q) = %v, encoding/json and utf8.Valid say %v", c, got, want)
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, c := range jsonCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), wantJSON(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json and utf8.Valid say %v", b, got, want)
		}
	})
}

// benchPayload is the engine benchmarks' payload: a few short fields.
var benchPayload = []byte(`{"to":"someone@example.com","subject":"hello","body":"a short message body of some length"}`)

func BenchmarkValidJSON(b *testing.B) {
	// long is the load generator's payload: a stamp and a long string.
	long := []byte(`{"t":"00000000000000001234","p":"` + strings.Repeat("x", 66) + `"}`)
	// utf8 is text that is not ASCII, each of its runes checked.
	utf8Text := []byte(`{"subject":"Привет, мир","body":"` + strings.Repeat("日本語のテキスト", 6) + `"}`)
	for _, tc := range []struct {
		name string
		fn   func([]byte) bool
	}{{"docket", Valid}, {"encoding_json", json.Valid}, {"encoding_json+utf8", wantJSON}} {
		for _, p := range []struct {
			name string
			b    []byte
		}{{"fields", benchPayload}, {"long_string", long}, {"utf8", utf8Text}} {
			b.Run(tc.name+"/"+p.name, func(b *testing.B) {
				b.SetBytes(int64(len(p.b)))
				b.ReportAllocs()
				for b.Loop() {
					if !tc.fn(p.b) {
						b.Fatal("invalid")
					}
				}
			})
		}
	}
}
