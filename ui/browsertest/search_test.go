package browsertest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/ui"
)

// TestSearchAndBulkInBrowser: in a queue of more tasks than the old scan
// window, the filter form finds and counts a task far past the window,
// newest first starts at the queue's last task, and a bulk cancel reached
// from the keyboard confirms the count and cancels exactly the matches.
func TestSearchAndBulkInBrowser(t *testing.T) {
	const fillers, window = 3000, 2000
	b := newTab(t, ui.Options{AllowActions: true, ScanWindow: window})
	q := b.db.Queue(ns, "bulk")
	batch := make([]engine.Task, fillers)
	for i := range batch {
		batch[i] = engine.Task{Kind: "filler", Payload: []byte(`{}`)}
	}
	if _, err := q.EnqueueBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var targets []uint64
	for i := range 10 {
		tenant := []string{"a", "b"}[i%2]
		id := b.enqueue("bulk", engine.Task{Kind: "target", Headers: map[string]string{"tenant": tenant}})
		if tenant == "a" {
			targets = append(targets, id)
		}
	}
	needle := b.enqueue("bulk", engine.Task{Kind: "needle"})

	// Found past the window, and counted.
	b.open("queue?p=acme&s=prod&q=bulk")
	b.do(chromedp.SetValue(`form.filters input[name="kind"]`, "needle"))
	b.click(`form.filters button[type="submit"]`, `#match-count`)
	if got := b.text("#match-count"); got != "1 task matches in the whole queue." {
		t.Fatalf("match count %q", got)
	}
	if !strings.Contains(b.text("#tasks"), fmt.Sprint(needle)) {
		t.Fatalf("the needle %d is not listed:\n%s", needle, b.text("#tasks"))
	}
	// Newest first is over the whole queue: its first row is the last task.
	b.open("queue?p=acme&s=prod&q=bulk&sort=newest")
	if first := eval[string](b, `document.querySelector("#tasks tbody th a").textContent`); first != fmt.Sprint(needle) {
		t.Fatalf("newest first starts at %s, want %d", first, needle)
	}

	// The bulk cancel, from the keyboard.
	b.open("queue?p=acme&s=prod&q=bulk&kind=target&header=tenant%3Da")
	if got := b.text("#match-count"); got != "5 tasks match in the whole queue." {
		t.Fatalf("match count %q", got)
	}
	if v := b.axe(); len(v) > 0 {
		t.Errorf("the filtered queue page:\n%s", strings.Join(v, "\n"))
	}
	for range 200 {
		b.do(chromedp.KeyEvent(kb.Tab))
		if eval[bool](b, `document.activeElement.value === "bulk-cancel"`) {
			break
		}
	}
	if !eval[bool](b, `document.activeElement.value === "bulk-cancel"`) {
		t.Fatal("no Tab reaches the bulk cancel")
	}
	b.do(chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#confirm-form`))
	if s := b.text("main"); !strings.Contains(s, "Cancel 5 tasks?") || !strings.Contains(s, `header "tenant=a"`) {
		t.Fatalf("confirmation:\n%s", s)
	}
	if v := b.axe(); len(v) > 0 {
		t.Errorf("the confirmation:\n%s", strings.Join(v, "\n"))
	}
	if c, _ := q.Counts(ctx); c.Ready != fillers+11 {
		t.Fatalf("the confirmation changed the queue: %+v", c)
	}
	b.do(chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#report`))
	if r := b.text("#report"); r != "Cancelled 5 tasks." {
		t.Fatalf("report %q", r)
	}
	if v := b.axe(); len(v) > 0 {
		t.Errorf("the report:\n%s", strings.Join(v, "\n"))
	}
	for _, id := range targets {
		if s := b.state("bulk", id); s != "gone" && !strings.Contains(s, "not found") {
			t.Fatalf("target %d is %s", id, s)
		}
	}
	if c, _ := q.Counts(ctx); c.Ready != fillers+6 {
		t.Fatalf("after the bulk cancel: %+v, want the fillers, tenant b's five and the needle", c)
	}
}
