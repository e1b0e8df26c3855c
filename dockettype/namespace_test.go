package dockettype

import (
	"errors"
	"strings"
	"testing"
)

var nsCases = []struct {
	ns   Namespace
	want string
}{
	{NS("acme", "prod"), "acme/prod"},
	{NS("ünï çødé", "a b\\c"), "ünï çødé/a b\\c"},
	{NS("a/b", "c"), `"a/b"/c`},
	{NS("a", "b/c"), `a/"b/c"`},
	{NS(`say "hi"`, "x"), `"say \"hi\""/x`},
	{NS("a", `"b`), `a/"\"b"`},
	{NS("tab\there", "nl\n"), `"tab\there"/"nl\n"`},
	{NS("bad\xff", "\u0085"), `"bad\xff"/"\u0085"`},
	{NS("\ufffd", "ok"), `"` + "\ufffd" + `"/ok`},
	{NS("", ""), "/"},
	{NS("/", "/"), `"/"/"/"`},
}

// TestNamespaceString: the common case prints as it is, a part that could
// be confused is quoted, and no two namespaces print the same.
func TestNamespaceString(t *testing.T) {
	seen := map[string]Namespace{}
	for _, c := range nsCases {
		got := c.ns.String()
		if got != c.want {
			t.Errorf("%#v prints %s, want %s", c.ns, got, c.want)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("%#v and %#v both print %s", prev, c.ns, got)
		}
		seen[got] = c.ns
		back, err := ParseNamespace(got)
		if err != nil || back != c.ns {
			t.Errorf("ParseNamespace(%s) = %#v, %v; want %#v", got, back, err, c.ns)
		}
	}
}

func TestParseNamespace(t *testing.T) {
	for in, want := range map[string]Namespace{
		`"acme"/prod`: NS("acme", "prod"), // quoting a plain part is allowed
		`acme/"prod"`: NS("acme", "prod"),
		`a/b`:         NS("a", "b"),
		"a/\t":        NS("a", "\t"), // lenient on what needs no quotes
		"/":           NS("", ""),
		`"a/b"/"c/d"`: NS("a/b", "c/d"),
		`"\u00e9"/\x`: NS("é", `\x`),
		"acme/ünï çø": NS("acme", "ünï çø"),
	} {
		got, err := ParseNamespace(in)
		if err != nil || got != want {
			t.Errorf("ParseNamespace(%s) = %#v, %v; want %#v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "acme", "a/b/c", `"a/b`, `"a"b/c`, `"a"`, `a/"b"c`, `a/b"`, `a"/b`, `"\q"/b`, `a/"\q"`} {
		if got, err := ParseNamespace(in); err == nil {
			t.Errorf("ParseNamespace(%s) = %#v, want an error", in, got)
		} else {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("ParseNamespace(%s): %v, want ErrInvalid", in, err)
			}
		}
	}
}

func FuzzNamespaceString(f *testing.F) {
	for _, c := range nsCases {
		f.Add(c.ns.Project, c.ns.Scope)
	}
	f.Fuzz(func(t *testing.T, project, scope string) {
		n := NS(project, scope)
		s := n.String()
		back, err := ParseNamespace(s)
		if err != nil || back != n {
			t.Fatalf("ParseNamespace(%s) = %#v, %v; want %#v", s, back, err, n)
		}
		if plainNSPart(project) && plainNSPart(scope) && s != project+"/"+scope {
			t.Fatalf("%#v prints %s", n, s)
		}
		if strings.Count(s, "/") > 1 && !strings.Contains(s, `"`) {
			t.Fatalf("%#v prints %s: ambiguous", n, s)
		}
	})
}
