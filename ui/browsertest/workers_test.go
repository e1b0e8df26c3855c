package browsertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/ui"
	"github.com/docketdb/docket/worker"
)

// crashed is the API of a worker process that dies: its presence is never
// removed, as when the process is killed, so only its TTL ends it.
type crashed struct{ *engine.DB }

func (crashed) RemoveWorker(context.Context, engine.Namespace, string) error { return nil }

// armingClock is a ManualClock that says when a timer of the duration
// watch is armed: the presence loop of the runtime watched arms its next
// one once it has reported.
type armingClock struct {
	*engine.ManualClock
	watch time.Duration
	armed chan struct{}
}

func (c *armingClock) NewTimer(d time.Duration) engine.Timer {
	t := c.ManualClock.NewTimer(d)
	if d == c.watch {
		select {
		case c.armed <- struct{}{}:
		default:
		}
	}
	return t
}

// until advances the clock by step until cond holds, at most n steps;
// after each step it waits for the watched presence loop to have
// reported (it arms its next timer) before it looks.
func until(t *testing.T, clock *armingClock, step time.Duration, n int, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == n {
			t.Fatalf("%s: not after %d steps of %v", what, n, step)
		}
		select {
		case <-clock.armed:
		default:
		}
		clock.Advance(step)
		select {
		case <-clock.armed:
		case <-time.After(5 * time.Second):
		}
	}
}

// settle waits, the clock still, until cond holds: it looks again each
// time the watched presence loop has reported, for at most 10 s.
func settle(t *testing.T, clock *armingClock, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-clock.armed:
		case <-deadline:
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// TestWorkersAndPeriodicPages starts worker runtimes on the dashboard's
// DB: the Workers page shows them live (queues, the running task and how
// long it has run, draining), a process that died vanishes once its TTL
// has passed on the engine's clock; the Periodic page pauses a schedule
// (its tick then enqueues nothing) and runs it now (its task is
// enqueued). Both pages pass axe in both schemes and fit a phone.
func TestWorkersAndPeriodicPages(t *testing.T) {
	clock := &armingClock{ManualClock: engine.NewManualClock(time.Date(2030, 1, 2, 3, 0, 30, 0, time.UTC)),
		watch: 5 * time.Second, armed: make(chan struct{}, 1)}
	b := newTab(t, ui.Options{AllowActions: true, Refresh: 300 * time.Millisecond}, func(s *setup) { s.engine.Clock = clock })
	b.enqueue("mail", engine.Task{Kind: "send"})

	started, release := make(chan uint64, 1), make(chan struct{})
	a := worker.New(b.db, worker.Options{Owner: "box-a", Version: "v-test", PresenceEvery: 5 * time.Second, PresenceTTL: 15 * time.Second})
	a.HandleFunc(ns, "mail", func(ctx context.Context, tk *worker.Task) error {
		select {
		case started <- tk.ID:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, worker.QueueOptions{Concurrency: 2, Lease: time.Hour})
	if err := a.Periodic(ns, "reports", "@every 1h", engine.Task{Kind: "report"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(release)
		a.Stop(context.Background())
	})
	dying := worker.New(crashed{b.db}, worker.Options{Owner: "box-dying", PresenceEvery: 3 * time.Second, PresenceTTL: 15 * time.Second})
	dying.HandleFunc(ns, "other", func(context.Context, *worker.Task) error { return nil }, worker.QueueOptions{})
	if err := dying.Start(ctx); err != nil {
		t.Fatal(err)
	}
	id := <-started

	b.open("workers")
	b.waitFor(`document.querySelector("#workers").innerText.includes("box-dying")`, 10*time.Second)
	running := func() bool {
		ws, err := b.db.Workers(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if w.ID == "box-a" && len(w.Running) == 1 && w.Running[0].ID == id {
				return true
			}
		}
		return false
	}
	until(t, clock, 5*time.Second, 40, "the running task reported", running)
	b.waitFor(`document.querySelector("#workers").innerText.includes("#`+itoa(id)+`")`, 10*time.Second)
	text := b.text("#workers")
	for _, want := range []string{"box-a", "v-test", "mail ×2", "1/2", "send", "for ", "running"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the Workers page lacks %q:\n%s", want, text)
		}
	}
	for _, scheme := range []string{"light", "dark"} {
		b.scheme(scheme)
		if v := b.axe(); len(v) > 0 {
			t.Errorf("%s scheme, workers:\n%s", scheme, strings.Join(v, "\n"))
		}
	}
	b.scheme("light")

	// The dying process stops without removing itself: it is listed,
	// draining, until its TTL passes.
	if err := dying.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	b.waitFor(`document.querySelector("#workers").innerText.includes("draining")`, 10*time.Second)
	gone := func() bool {
		ws, _ := b.db.Workers(ctx, ns)
		return len(ws) == 1 && ws[0].ID == "box-a"
	}
	until(t, clock, 5*time.Second, 40, "the dead process expired", gone)
	b.waitFor(`!document.querySelector("#workers").innerText.includes("box-dying") && document.querySelector("#workers").innerText.includes("box-a")`, 10*time.Second)

	// Periodic: pause, a tick passes without a task; run now enqueues one.
	b.open("periodic")
	b.waitFor(`document.querySelector("#schedules").innerText.includes("@every 1h")`, 10*time.Second)
	for _, scheme := range []string{"light", "dark"} {
		b.scheme(scheme)
		if v := b.axe(); len(v) > 0 {
			t.Errorf("%s scheme, periodic:\n%s", scheme, strings.Join(v, "\n"))
		}
	}
	b.scheme("light")
	b.click(`button[value="schedule-pause"]`, `button[value="schedule-resume"]`)
	schedule := func() engine.ScheduleInfo {
		ss, err := b.db.Schedules(ctx, ns)
		if err != nil || len(ss) > 1 {
			t.Fatalf("schedules %+v, %v", ss, err)
		}
		if len(ss) == 0 {
			return engine.ScheduleInfo{} // its report is a step behind the clock
		}
		return ss[0]
	}
	if !schedule().Paused {
		t.Fatal("the Pause button did not pause the schedule")
	}
	reports := func() int {
		c, err := b.db.Queue(ns, "reports").Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c.Ready
	}
	// To the schedule's next tick in one step, then wait (the clock
	// still) for the runtime to take it and report.
	clock.Advance(schedule().Next.Sub(clock.Now()))
	settle(t, clock, "the paused tick skipped", func() bool { return schedule().Outcome == "skipped: paused" })
	if n := reports(); n != 0 {
		t.Fatalf("a paused schedule enqueued %d tasks", n)
	}
	b.waitFor(`document.querySelector("#schedules").innerText.includes("skipped: paused")`, 10*time.Second)
	b.click(`button[value="schedule-run"]`, `#schedules`)
	b.waitFor(`document.querySelector("#schedules").innerText.includes("run requested")`, 10*time.Second)
	until(t, clock, 5*time.Second, 40, "run now enqueued", func() bool { return reports() == 1 })
	b.waitFor(`!document.querySelector("#schedules").innerText.includes("run requested") && !!document.querySelector("#schedules a[href*='q=reports'][href*='id=']")`, 10*time.Second)
	b.click(`button[value="schedule-resume"]`, `button[value="schedule-pause"]`)
	if schedule().Paused {
		t.Fatal("the Resume button did not resume the schedule")
	}

	// A phone: both pages fit.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	for _, path := range []string{"workers", "periodic"} {
		b.open(path)
		if w := eval[[]int](b, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
			t.Errorf("%q is %d px wide on a %d px screen", path, w[0], w[1])
		}
		b.shot("phone-"+path, false)
	}
	b.do(chromedp.EmulateViewport(1440, 900))
	for _, path := range []string{"workers", "periodic"} {
		b.open(path)
		b.shot(path, false)
	}
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
