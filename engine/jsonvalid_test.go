package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

var jsonCases = []string{
	``, ` `, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-12.5e10`, `.5`, `+1`,
	`""`, `"a`, `"\""`, `"\u00e9"`, `"\u00g9"`, `"\u00e"`, `"\x"`, "\"\x01\"", "\"\xff\"", `"\/"`,
	`true`, `tru`, `truex`, `false`, `null`, `nul`, `NaN`,
	`[]`, `[`, `]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, ` [ 1 , [ ] , { } ] `,
	`{}`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":1,"b":[true,null]}`, `{1:2}`,
	`{"a":1}}`, `[1]]`, `1 2`, `{"a":{"b":{"c":[[[]]]}}}`, "\t{\r\n}\n", `{"a":1]`, `[1}`,
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	cases := append([]string{}, jsonCases...)
	cases = append(cases, strings.Repeat("[", 10000)+strings.Repeat("]", 10000),
		strings.Repeat("[", 10001)+strings.Repeat("]", 10001),
		strings.Repeat(`{"a":`, 10000)+"1"+strings.Repeat("}", 10000),
		strings.Repeat(`{"a":`, 10001)+"1"+strings.Repeat("}", 10001))
	for _, c := range cases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%.60q) = %v, encoding/json says %v", c, got, want)
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, c := range jsonCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	for _, tc := range []struct {
		name string
		fn   func([]byte) bool
	}{{"docket", validJSON}, {"encoding_json", json.Valid}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(benchPayload)))
			b.ReportAllocs()
			for b.Loop() {
				if !tc.fn(benchPayload) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
