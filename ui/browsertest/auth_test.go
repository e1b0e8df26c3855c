package browsertest

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/ui"
)

// policy lets "reader" read acme/* and "admin" do anything.
var policy = engine.Policy{
	"reader": {{Project: "acme", Scope: "*", Perms: engine.PermRead | engine.PermKVRead}},
	"admin":  {{Project: "*", Scope: "*", Perms: engine.PermAll}},
}

func withPolicy(s *setup) { s.engine.Authorizer = policy }

// where is the page the tab shows, from the dashboard's prefix on.
func (b *tab) where() string {
	b.t.Helper()
	return strings.TrimPrefix(eval[string](b, "location.href"), b.base)
}

// signIn types token into the sign-in form the tab shows and submits it,
// then waits for the page it leads to to show ready.
func (b *tab) signIn(token, ready string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible("#token"), chromedp.SendKeys("#token", token),
		chromedp.Click(`form.login button[type="submit"]`), chromedp.WaitVisible(ready))
}

// TestSignInKeepsDeepLink: a link to a page opened without a session goes
// through the sign-in form and back to that page; signing out ends the
// session, so the same link asks to sign in again.
func TestSignInKeepsDeepLink(t *testing.T) {
	tokens := map[string]string{"s3cret": "admin", "look": "reader"}
	b := newTab(t, ui.Options{AllowActions: true, Login: func(tok string) (engine.Caller, error) {
		if id, ok := tokens[tok]; ok {
			return engine.Caller{ID: id}, nil
		}
		return engine.Caller{}, errors.New("unknown token")
	}}, withPolicy)
	dead := b.kill("jobs", "k", "boom", `{}`)
	deep := fmt.Sprintf("task?p=acme&s=prod&q=jobs&id=%d", dead)
	b.open(deep)
	b.do(chromedp.WaitVisible("#token"))
	if got := b.where(); !strings.HasPrefix(got, "login?next=") {
		t.Fatalf("a deep link without a session shows %q", got)
	}
	b.signIn("s3cret", "#task")
	if got := b.where(); got != deep {
		t.Fatalf("after sign-in: %q, want %q", got, deep)
	}
	if s := b.text("header .who"); s != "admin" {
		t.Fatalf("signed in as %q", s)
	}
	if n := eval[int](b, `document.querySelectorAll(".task-actions button[name=op]").length`); n == 0 {
		t.Fatal("an admin is shown no action on a dead task")
	}
	// The page's script cannot read the session cookie (HttpOnly), and
	// no cookie holds the token.
	if c := eval[string](b, "document.cookie"); strings.Contains(c, "docket_session") || strings.Contains(c, "s3cret") {
		t.Fatalf("document.cookie %q", c)
	}
	b.click(`form[action$="logout"] button`, "#token")
	b.open(deep)
	b.do(chromedp.WaitVisible("#token"))
	// Signed in as a reader, the same page offers no action.
	b.signIn("look", "#task")
	if got := b.where(); got != deep {
		t.Fatalf("after the reader's sign-in: %q, want %q", got, deep)
	}
	if n := eval[int](b, `document.querySelectorAll("form[action$='/action'], button[name=op]").length`); n != 0 {
		t.Fatalf("a reader is shown %d action elements", n)
	}
	if s := b.text("header .badge"); s != "read-only" {
		t.Fatalf("badge %q", s)
	}
	b.click(`form[action$="logout"] button`, "#token")
}

// TestReadOnlyCallerSeesNoButtons: with actions allowed, a caller who may
// only read sees the queue, task and dead-letter pages without a button,
// box or form that acts; an admin sees them on the same pages.
func TestReadOnlyCallerSeesNoButtons(t *testing.T) {
	var who atomic.Value
	who.Store("reader")
	b := newTab(t, ui.Options{AllowActions: true, Caller: func(*http.Request) (engine.Caller, error) {
		return engine.Caller{ID: who.Load().(string)}, nil
	}}, withPolicy)
	dead := b.kill("jobs", "k", "boom", `{}`)
	b.enqueue("jobs", engine.Task{Delay: time.Hour})
	pages := map[string]string{
		"queue?p=acme&s=prod&q=jobs&state=dead":              "#tasks",
		"queue?p=acme&s=prod&q=jobs&state=scheduled":         "#tasks",
		fmt.Sprintf("task?p=acme&s=prod&q=jobs&id=%d", dead): "#task",
		"dead?p=acme&s=prod&q=jobs":                          "#groups",
	}
	const acting = `document.querySelectorAll("form[action$='/action'], button[name=op], td.pick input, #select-all").length`
	for path, ready := range pages {
		who.Store("reader")
		b.open(path)
		b.do(chromedp.WaitVisible(ready))
		if n := eval[int](b, acting); n != 0 {
			t.Fatalf("%s: a reader is shown %d action elements", path, n)
		}
		if s := b.text("header .badge"); s != "read-only" {
			t.Fatalf("%s: badge %q", path, s)
		}
		who.Store("admin")
		b.open(path)
		b.do(chromedp.WaitVisible(ready))
		if n := eval[int](b, acting); n == 0 {
			t.Fatalf("%s: an admin is shown no action", path)
		}
	}
}
