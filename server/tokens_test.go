package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
)

func TestTokensAuthenticateAndAuthorize(t *testing.T) {
	t.Parallel()
	tok, line, err := NewToken("billing", "acme/prod:enqueue+work", "acme/*:read")
	if err != nil {
		t.Fatal(err)
	}
	admTok, admLine, err := NewToken("ops", "*/*:all")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ParseTokens(strings.NewReader("# comment\n\n" + line + "\n" + admLine + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := tab.Authenticate(tok)
	if !ok || c.ID != "billing" {
		t.Fatalf("Authenticate = %v, %v; want billing", c, ok)
	}
	if _, ok := tab.Authenticate(tok + "x"); ok {
		t.Fatal("a wrong token authenticated")
	}
	if _, ok := tab.Authenticate(""); ok {
		t.Fatal("the empty token authenticated")
	}
	prod, dev := engine.NS("acme", "prod"), engine.NS("acme", "dev")
	if got := tab.Allowed(c, prod, engine.PermAll); got != engine.PermEnqueue|engine.PermWork|engine.PermRead {
		t.Fatalf("prod perms = %v", got)
	}
	if got := tab.Allowed(c, dev, engine.PermAll); got != engine.PermRead {
		t.Fatalf("dev perms = %v", got)
	}
	if got := tab.Allowed(c, engine.NS("other", "prod"), engine.PermAll); got != 0 {
		t.Fatalf("other perms = %v", got)
	}
	a, _ := tab.Authenticate(admTok)
	if got := tab.Allowed(a, engine.NS("x", "y"), engine.PermAll); got != engine.PermAll {
		t.Fatalf("admin perms = %v", got)
	}
}

func TestTokensFileErrors(t *testing.T) {
	t.Parallel()
	good := "sha256:" + strings.Repeat("ab", 32) + " c1 a/b:read"
	for _, tc := range []struct{ name, text, want string }{
		{"one field", "sha256:" + strings.Repeat("ab", 32), "want"},
		{"no prefix", strings.Repeat("ab", 32) + " c1", "sha256:"},
		{"short hash", "sha256:abcd c1", "64 hex"},
		{"bad hex", "sha256:" + strings.Repeat("zz", 32) + " c1", "64 hex"},
		{"bad grant", "sha256:" + strings.Repeat("cd", 32) + " c1 acme:read", "PROJECT/SCOPE:PERMS"},
		{"bad perm", "sha256:" + strings.Repeat("cd", 32) + " c1 a/b:fly", "unknown permission"},
		{"duplicate", good + "\n" + good, "listed twice"},
		{"control char", "sha256:" + strings.Repeat("cd", 32) + " c\x01", "control"},
		{"long line", strings.Repeat("x", maxTokensLine+1), "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTokens(strings.NewReader("# ok\n" + tc.text + "\n"))
			if !errors.Is(err, ErrTokens) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want ErrTokens mentioning %q", err, tc.want)
			}
			line := "line 2"
			if tc.name == "duplicate" {
				line = "line 3"
			}
			if !strings.Contains(err.Error(), line) {
				t.Fatalf("err = %v; want the line number", err)
			}
		})
	}
}

func TestTokensReloadKeepsOldTableOnError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens.txt")
	tok1, line1, _ := NewToken("one", "a/b:read")
	tok2, line2, _ := NewToken("two", "a/b:work")
	if err := os.WriteFile(path, []byte(line1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tab, err := LoadTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(line2+"\nnot a line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tab.Reload(); !errors.Is(err, ErrTokens) {
		t.Fatalf("Reload of a bad file = %v; want ErrTokens", err)
	}
	if _, ok := tab.Authenticate(tok1); !ok {
		t.Fatal("a failed reload dropped the table in force")
	}
	if err := os.WriteFile(path, []byte(line2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tab.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := tab.Authenticate(tok1); ok {
		t.Fatal("a revoked token still authenticates after reload")
	}
	if c, ok := tab.Authenticate(tok2); !ok || c.ID != "two" {
		t.Fatalf("new token: %v %v", c, ok)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := tab.Reload(); !errors.Is(err, ErrTokens) {
		t.Fatalf("Reload of a missing file = %v", err)
	}
	if _, ok := tab.Authenticate(tok2); !ok {
		t.Fatal("a missing file dropped the table in force")
	}
}

func TestNewTokenRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		caller string
		grants []string
	}{{"", nil}, {"a b", nil}, {"ok", []string{"nope"}}, {strings.Repeat("x", 300), nil}} {
		if _, _, err := NewToken(tc.caller, tc.grants...); !errors.Is(err, ErrTokens) {
			t.Errorf("NewToken(%q, %q) = %v; want ErrTokens", tc.caller, tc.grants, err)
		}
	}
}

// TestTokensRefuseCallerIDsTheEngineRefuses: a caller id the engine would
// refuse on every call (over engine.MaxNameBytes, or with a control
// character) is refused when the file is read, naming the line.
func TestTokensRefuseCallerIDsTheEngineRefuses(t *testing.T) {
	t.Parallel()
	_, good, _ := NewToken("ok", "a/b:read")
	for _, tc := range []struct{ id, want string }{
		{strings.Repeat("c", engine.MaxNameBytes+1), "256 bytes, over the limit of 255"},
		{"csi\u009b", "control character"},
	} {
		_, err := ParseTokens(strings.NewReader("# callers\n" + good + "\nsha256:" + strings.Repeat("ab", 32) + " " + tc.id + " a/b:read\n"))
		if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("caller id of %d bytes: %v", len(tc.id), err)
		}
		if _, _, err := NewToken(tc.id, "a/b:read"); err == nil {
			t.Fatalf("NewToken made a token for caller id of %d bytes", len(tc.id))
		}
	}
	id := strings.Repeat("c", engine.MaxNameBytes)
	tokens, err := ParseTokens(strings.NewReader("sha256:" + strings.Repeat("ab", 32) + " " + id + " a/b:read\n"))
	if err != nil {
		t.Fatalf("a caller id of %d bytes: %v", len(id), err)
	}
	db, err := engine.OpenInMemory(engine.Options{Authorizer: tokens, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.As(engine.Caller{ID: id}).Queue(engine.NS("a", "b"), "q").Counts(context.Background()); err != nil {
		t.Fatalf("the engine refuses a caller id the tokens file accepts: %v", err)
	}
}

// TestTokensListGrants: the tokens table lists a caller's grants, so that
// DB.Queues answers a caller from them (engine.GrantLister): a caller
// granted one namespace among many sees its queues and no other.
func TestTokensListGrants(t *testing.T) {
	t.Parallel()
	_, line, err := NewToken("billing", "acme/prod:read")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ParseTokens(strings.NewReader(line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	var lister engine.GrantLister = tab
	if g := lister.Grants(engine.Caller{ID: "billing"}); len(g) != 1 || g[0] != (engine.Grant{Project: "acme", Scope: "prod", Perms: engine.PermRead}) {
		t.Fatalf("Grants(billing) = %+v", g)
	}
	if g := lister.Grants(engine.Caller{ID: "nobody"}); len(g) != 0 {
		t.Fatalf("Grants(nobody) = %+v", g)
	}
	db, err := engine.OpenInMemory(engine.Options{Authorizer: tab})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, ns := range []engine.Namespace{engine.NS("acme", "prod"), engine.NS("acme", "dev"), engine.NS("other", "prod")} {
		if _, err := db.Queue(ns, "q").Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	qs, err := db.As(engine.Caller{ID: "billing"}).Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Namespace != engine.NS("acme", "prod") {
		t.Fatalf("billing's queues: %+v", qs)
	}
}
