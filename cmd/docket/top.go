package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docketdb/docket/engine"
)

// topSample is every queue at one moment.
type topSample struct {
	at     time.Time
	queues []engine.QueueInfo
}

const topAbout = `
Every namespace and queue with its tasks by state, the rates of enqueues,
completions and failures (retries and dead letters) since the previous frame,
and the age of the oldest ready task. On a terminal the frame is redrawn in
place every -every; otherwise frames follow each other. -once prints one frame
(rates need two, so it shows none). On a directory each frame opens it
read-only and closes it again, so a program can still open it in between;
for a directory a server has open, use -server.`

func runTop(ctx context.Context, c cli, args []string) error {
	fs := newFlagsFor(c, "top", "[-dir DIR | -server URL] [-once] [-every D]", topAbout)
	tf := addTargetFlags(c, fs, wholeDB)
	once := fs.Bool("once", false, "print one frame and exit")
	every := fs.Duration("every", time.Second, "time between frames")
	if _, err := tf.parse(args, 0, 0); err != nil {
		return err
	}
	if *tf.json {
		return usageError{"top: -json is for scripts, which want 'docket stats -json'"}
	}
	if *every < 10*time.Millisecond {
		return usageError{"top: -every must be at least 10ms"}
	}
	sample, closeSource, err := topSource(ctx, tf)
	if err != nil {
		return err
	}
	defer closeSource()
	where := *tf.dir
	if *tf.server != "" {
		where = *tf.server
	}
	if *once {
		cur, err := sample(ctx)
		if err != nil {
			return err
		}
		renderTop(c.stdout, where, nil, cur, nil)
		return nil
	}
	tty := isTerminal(c.stdout)
	if tty {
		fmt.Fprint(c.stdout, "\x1b[?25l\x1b[2J") // hide the cursor, clear the screen
		defer fmt.Fprint(c.stdout, "\x1b[?25h\n")
	}
	tick := time.NewTicker(*every)
	defer tick.Stop()
	var prev *topSample
	for {
		cur, err := sample(ctx)
		if ctx.Err() != nil {
			return nil // interrupted: a normal way to leave
		}
		var frame bytes.Buffer
		renderTop(&frame, where, prev, cur, err)
		if err == nil {
			prev = cur
		}
		if tty {
			// Home, then each line cleared to its end, then the rest of
			// the screen: a redraw without flicker.
			text := strings.ReplaceAll(frame.String(), "\n", "\x1b[K\n")
			fmt.Fprint(c.stdout, "\x1b[H"+text+"\x1b[J")
		} else {
			fmt.Fprintln(c.stdout, frame.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// topSource returns how to take a sample: through the server's API, or by
// opening the directory read-only for each one.
func topSource(ctx context.Context, tf *targetFlags) (func(context.Context) (*topSample, error), func(), error) {
	read := func(ctx context.Context, api engine.API) (*topSample, error) {
		qs, err := api.Queues(ctx)
		if err != nil {
			return nil, err
		}
		return &topSample{at: api.Clock().Now(), queues: qs}, nil
	}
	if *tf.server != "" {
		t, err := tf.open(ctx, false)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context) (*topSample, error) { return read(ctx, t.api) }, func() { t.Close() }, nil
	}
	dir := *tf.dir
	// The first open says at once when the directory cannot be read.
	db, err := openDir(tf.c.stderr, dir, false)
	if err != nil {
		return nil, nil, err
	}
	db.Close()
	return func(ctx context.Context) (*topSample, error) {
		db, err := openDir(tf.c.stderr, dir, false)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		return read(ctx, db)
	}, func() {}, nil
}

// renderTop writes one frame: a header, then a line per queue. Rates come
// from the difference between prev and cur (none without prev, or for a
// queue whose totals went back, as after a restart). err, if set, is shown
// in place of the queues.
func renderTop(w io.Writer, where string, prev, cur *topSample, err error) {
	now := time.Now()
	if cur != nil {
		now = cur.at
	}
	if err != nil {
		fmt.Fprintf(w, "docket top  %s  %s\n\n%s\n", where, now.UTC().Format("15:04:05"), message(err))
		return
	}
	var sum engine.Counts
	for _, q := range cur.queues {
		n := q.Counts
		sum.Ready += n.Ready
		sum.Scheduled += n.Scheduled
		sum.InFlight += n.InFlight
		sum.Dead += n.Dead
		sum.Completed += n.Completed
		sum.Waiting += n.Waiting
	}
	waiting := ""
	if sum.Waiting > 0 {
		waiting = fmt.Sprintf(", %d waiting on others", sum.Waiting)
	}
	fmt.Fprintf(w, "docket top  %s  %s  %d queues: %d ready, %d scheduled, %d in flight, %d dead%s\n\n",
		where, now.UTC().Format("15:04:05"), len(cur.queues), sum.Ready, sum.Scheduled, sum.InFlight, sum.Dead, waiting)
	if len(cur.queues) == 0 {
		fmt.Fprintln(w, "no queue holds a task")
		return
	}
	before := map[string]engine.QueueInfo{}
	var dt float64
	if prev != nil {
		dt = cur.at.Sub(prev.at).Seconds()
		for _, q := range prev.queues {
			before[q.Namespace.String()+"\x00"+q.Name] = q
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "namespace\tqueue\tready\tscheduled\tin-flight\tdead\tcompleted\tenq/s\tdone/s\tfail/s\toldest ready\t")
	for _, q := range cur.queues {
		n := q.Counts
		enq, done, fail := "-", "-", "-"
		if p, ok := before[q.Namespace.String()+"\x00"+q.Name]; ok && dt > 0 {
			enq = rate(p.Totals.Enqueued, q.Totals.Enqueued, dt)
			done = rate(p.Totals.Completed, q.Totals.Completed, dt)
			fail = rate(p.Totals.Retried+p.Totals.DeadLettered, q.Totals.Retried+q.Totals.DeadLettered, dt)
		}
		oldest := "-"
		if !q.OldestReady.IsZero() && n.Ready > 0 {
			oldest = age(cur.at.Sub(q.OldestReady))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", oneLine(q.Namespace.String()), oneLine(q.Name),
			n.Ready, n.Scheduled, n.InFlight, n.Dead, n.Completed, enq, done, fail, oldest)
	}
	tw.Flush()
}

// rate is the change from a to b over dt seconds, per second; "-" when the
// counter went back (the server restarted).
func rate(a, b uint64, dt float64) string {
	if b < a {
		return "-"
	}
	r := float64(b-a) / dt
	switch {
	case r == 0:
		return "0"
	case r < 10:
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.0f", r)
}

// age is a short duration: 850ms, 12s, 4m10s, 3h5m, 2d4h.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}
