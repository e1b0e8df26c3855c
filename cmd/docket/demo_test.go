package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// shellSplit splits a command line the way a POSIX shell does for the
// quoting shellQuote produces: words, single quotes, and '\” for a quote.
func shellSplit(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quoted && ch == '\'':
			quoted = false
		case quoted:
			cur.WriteByte(ch)
		case ch == '\'':
			quoted, inWord = true, true
		case ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

func TestShellQuoteRoundTrip(t *testing.T) {
	for _, s := range []string{"plain", "/tmp/a b", "it's", "", "$HOME", "a\"b", "x;rm -rf"} {
		got := shellSplit(t, "cmd "+shellQuote(s))
		if len(got) != 2 || got[1] != s {
			t.Errorf("shellQuote(%q) = %s splits to %q", s, shellQuote(s), got)
		}
	}
}

// TestDemoExplainsItselfAndItsCommandsPaste: the demo says up front how many
// tasks it runs and which share fails or dies on purpose, and the redrive
// command it prints runs as printed.
func TestDemoExplainsItselfAndItsCommandsPaste(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's a dir")
	code, out, errs := docket(t, "demo", "-dir", dir, "-tasks", "60", "-workers", "2")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, errs)
	}
	intro := out[:strings.Index(out, "enqueued")]
	for _, want := range []string{
		"this run enqueues 60 tasks on queue demo/local/emails and works them with 2 workers (3 attempts each)",
		"53 succeed on their first attempt",
		"5 fail their first attempt on purpose and succeed on a retry",
		"2 fail every attempt on purpose and end in the dead-letter queue",
	} {
		if !strings.Contains(intro, want) {
			t.Fatalf("the demo does not say up front %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "dead 2") {
		t.Fatalf("the summary does not show the 2 dead tasks:\n%s", out)
	}
	var redrive, list string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "docket dead ") {
			if strings.HasSuffix(l, "-redrive-all") {
				redrive = l
			} else {
				list = l
			}
		}
	}
	if redrive == "" || list == "" {
		t.Fatalf("no commands printed:\n%s", out)
	}
	code, lout, errs := docket(t, shellSplit(t, list)[1:]...)
	if code != 0 || strings.Count(lout, "smtp 451") != 2 {
		t.Fatalf("%s: exit %d\n%s\n%s", list, code, lout, errs)
	}
	code, rout, errs := docket(t, shellSplit(t, redrive)[1:]...)
	if code != 0 || !strings.Contains(rout, "2 tasks redriven") {
		t.Fatalf("%s: exit %d\n%s\n%s", redrive, code, rout, errs)
	}
	code, sout, _ := docket(t, "stats", "-dir", dir)
	if code != 0 || !regexp.MustCompile(`emails\s+2\s+0\s+0\s+0`).MatchString(sout) {
		t.Fatalf("after redrive:\n%s", sout)
	}
}
