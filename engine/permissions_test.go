package engine

import "testing"

// Permissions reports what a view may do, as the calls' own checks decide
// it: everything for the DB as opened, the grant for a caller, nothing for
// a view that refuses every call.
func TestPermissions(t *testing.T) {
	t.Parallel()
	policy := Policy{
		"reader": {{Project: "acme", Scope: "*", Perms: PermRead | PermKVRead}},
		"admin":  {{Project: "*", Scope: "*", Perms: PermAll}},
	}
	acme, other := NS("acme", "prod"), NS("other", "prod")
	open := func(secure bool) *DB {
		db, err := OpenInMemory(Options{Secure: secure, Authorizer: policy})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db := open(false)
	for _, tc := range []struct {
		name string
		view *DB
		ns   Namespace
		want Perm
	}{
		{"owner", db, acme, PermAll},
		{"owner in secure mode", open(true), acme, 0},
		{"reader", db.As(Caller{ID: "reader"}), acme, PermRead | PermKVRead},
		{"reader elsewhere", db.As(Caller{ID: "reader"}), other, 0},
		{"admin", db.As(Caller{ID: "admin"}), other, PermAll},
		{"stranger", db.As(Caller{ID: "stranger"}), acme, 0},
		{"view of a view", db.As(Caller{ID: "admin"}).As(Caller{ID: "admin"}), acme, 0},
		{"invalid caller", db.As(Caller{ID: ""}), acme, 0},
	} {
		if got := tc.view.Permissions(tc.ns); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		// The calls agree: a view that may not pause is refused.
		err := tc.view.Queue(tc.ns, "q").Pause(t.Context())
		if (err == nil) != (tc.want&PermAdmin != 0) {
			t.Errorf("%s: pause gave %v with permissions %s", tc.name, err, tc.want)
		}
	}
}
