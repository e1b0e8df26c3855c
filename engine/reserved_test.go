package engine

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReservedKeys: the keys under ReservedPrefix are the namespace's
// system area. No call of the KV handle, and no op of an enqueue or a
// completion, reads or writes them (ErrInvalid, nothing changes), a scan
// skips them wherever they fall in key order, and SystemKV reaches only
// them, with PermSystem and nothing less.
func TestReservedKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) {
		o.Authorizer = Policy{
			"kv":  {{Project: "*", Scope: "*", Perms: PermKVRead | PermKVWrite | PermEnqueue | PermWork}},
			"sys": {{Project: "*", Scope: "*", Perms: PermSystem}},
		}
	})
	user, sys := e.db.KV(ns), e.db.SystemKV(ns)
	for _, k := range []string{"a", "docket", "docket.", "docket0", "docketz", "z"} {
		if _, err := user.Commit(ctx, Set(k, []byte(k))); err != nil {
			t.Fatalf("set %q: %v", k, err)
		}
	}
	for _, k := range []string{"docket/", "docket/periodic/q/x", "docket/z"} {
		if _, err := sys.Commit(ctx, Set(k, []byte("system"))); err != nil {
			t.Fatalf("system set %q: %v", k, err)
		}
	}
	before := dump(e.db)
	q := e.q("q")
	reserved := "docket/periodic/q/x"
	e.enqueue(q, Task{})
	l := e.claim(q, 1)[0]
	for name, err := range map[string]error{
		"set":              errOnly(user.Commit(ctx, Set(reserved, []byte("1")))),
		"delete":           errOnly(user.Commit(ctx, Delete(reserved))),
		"if version":       errOnly(user.Commit(ctx, IfVersion(reserved, 1), Set("a", nil))),
		"if exists":        errOnly(user.Commit(ctx, IfExists(reserved))),
		"if absent":        errOnly(user.Commit(ctx, IfAbsent(reserved))),
		"get":              errOnly(user.Get(ctx, reserved)),
		"enqueue op":       errOnly(q.Enqueue(ctx, Task{}, Set(reserved, nil))),
		"complete op":      errOnly(q.Complete(ctx, l, Done{Ops: []Op{Delete(reserved)}})),
		"system plain key": errOnly(sys.Commit(ctx, Set("a", nil))),
		"system get plain": errOnly(sys.Get(ctx, "a")),
	} {
		if err == nil {
			t.Fatalf("%s of a reserved key (or a plain key through SystemKV) was accepted", name)
		}
		wantErr(t, err, ErrInvalid)
	}
	if _, err := q.Complete(ctx, l, Done{}); err != nil {
		t.Fatal(err)
	}
	keys := func(kv KV, o ScanOptions) []string {
		t.Helper()
		es, err := kv.Scan(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Key)
		}
		return out
	}
	userKeys := []string{"a", "docket", "docket.", "docket0", "docketz", "z"}
	for _, c := range []struct {
		o    ScanOptions
		want []string
	}{
		{ScanOptions{}, userKeys},
		{ScanOptions{Prefix: "docket"}, userKeys[1:5]},
		{ScanOptions{Prefix: "docket/"}, nil},
		{ScanOptions{Start: "docket/p"}, userKeys[3:]},
		{ScanOptions{Start: "docket.", Limit: 2}, []string{"docket.", "docket0"}},
		{ScanOptions{End: "docket/zz"}, userKeys[:3]},
	} {
		if got := keys(user, c.o); !slices.Equal(got, c.want) {
			t.Errorf("user scan %+v: %q, want %q", c.o, got, c.want)
		}
	}
	for _, c := range []struct {
		o    ScanOptions
		want []string
	}{
		{ScanOptions{}, []string{"docket/", "docket/periodic/q/x", "docket/z"}},
		{ScanOptions{Prefix: "docket/p"}, []string{"docket/periodic/q/x"}},
		{ScanOptions{Prefix: "a"}, nil},
		{ScanOptions{Start: "a", End: "z", Limit: 2}, []string{"docket/", "docket/periodic/q/x"}},
	} {
		if got := keys(sys, c.o); !slices.Equal(got, c.want) {
			t.Errorf("system scan %+v: %q, want %q", c.o, got, c.want)
		}
	}
	// The refusals changed nothing (the claim and completion above did, so
	// compare only the KV entries).
	kvOnly := func(s string) (out []string) {
		for _, line := range strings.Split(s, "\n") {
			if strings.HasPrefix(line, "kv ") {
				out = append(out, line)
			}
		}
		return out
	}
	if !slices.Equal(kvOnly(dump(e.db)), kvOnly(before)) {
		t.Fatal("a refused call changed a KV entry")
	}
	// Permissions: kv-write does not reach the system area; PermSystem
	// reaches nothing else.
	kvCaller, sysCaller := e.db.As(Caller{ID: "kv"}), e.db.As(Caller{ID: "sys"})
	wantErr(t, errOnly(kvCaller.SystemKV(ns).Commit(ctx, Set(reserved, []byte("2")))), ErrPermission)
	wantErr(t, errOnly(kvCaller.SystemKV(ns).Get(ctx, reserved)), ErrPermission)
	wantErr(t, errOnly(kvCaller.SystemKV(ns).Scan(ctx, ScanOptions{})), ErrPermission)
	if _, err := sysCaller.SystemKV(ns).Commit(ctx, Set(reserved, []byte("3"))); err != nil {
		t.Fatal(err)
	}
	if v, err := sysCaller.SystemKV(ns).Get(ctx, reserved); err != nil || string(v.Value) != "3" {
		t.Fatalf("system get: %q %v", v.Value, err)
	}
	wantErr(t, errOnly(sysCaller.KV(ns).Get(ctx, "a")), ErrPermission)
	wantErr(t, errOnly(sysCaller.SystemKV(ns).Commit(ctx, Set(reserved, nil), Enqueue("q", Task{}))), ErrPermission)
	// The system area is durable like the rest.
	e.clock.Advance(time.Second)
	e.reopen()
	if v, err := e.db.SystemKV(ns).Get(ctx, reserved); err != nil || string(v.Value) != "3" {
		t.Fatalf("system entry after reopen: %q %v", v.Value, err)
	}
}
