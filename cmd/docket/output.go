package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/docketdb/docket/engine"
)

// The JSON the commands print. Names are snake_case; payloads, progress
// and results are JSON already and are printed as themselves; times are
// RFC 3339 in UTC; durations are Go duration strings.

type nsJSON struct {
	Project string `json:"project"`
	Scope   string `json:"scope"`
}

func nsOf(n engine.Namespace) nsJSON { return nsJSON{n.Project, n.Scope} }

type countsJSON struct {
	Ready     int `json:"ready"`
	Scheduled int `json:"scheduled"`
	InFlight  int `json:"in_flight"`
	Dead      int `json:"dead"`
	Completed int `json:"completed"`
	Waiting   int `json:"waiting"`
}

func countsOf(n engine.Counts) countsJSON {
	return countsJSON{n.Ready, n.Scheduled, n.InFlight, n.Dead, n.Completed, n.Waiting}
}

type totalsJSON struct {
	Enqueued     uint64 `json:"enqueued"`
	Claimed      uint64 `json:"claimed"`
	Completed    uint64 `json:"completed"`
	Retried      uint64 `json:"retried"`
	DeadLettered uint64 `json:"dead_lettered"`
}

type queueJSON struct {
	Namespace   nsJSON      `json:"namespace"`
	Queue       string      `json:"queue"`
	Counts      countsJSON  `json:"counts"`
	OldestReady *time.Time  `json:"oldest_ready,omitempty"`
	Totals      totalsJSON  `json:"totals"`
	Paused      bool        `json:"paused,omitempty"`
	Limits      *limitsJSON `json:"limits,omitempty"`
}

func queueOf(q engine.QueueInfo) queueJSON {
	t := q.Totals
	return queueJSON{Namespace: nsOf(q.Namespace), Queue: q.Name, Counts: countsOf(q.Counts), OldestReady: timePtr(q.OldestReady),
		Totals: totalsJSON{t.Enqueued, t.Claimed, t.Completed, t.Retried, t.DeadLettered}, Paused: q.Paused, Limits: limitsOf(q.Limits)}
}

type attemptJSON struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
}

type taskJSON struct {
	ID              uint64            `json:"id"`
	Namespace       nsJSON            `json:"namespace"`
	Queue           string            `json:"queue"`
	Kind            string            `json:"kind,omitempty"`
	State           string            `json:"state"`
	Payload         json.RawMessage   `json:"payload,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	Priority        int               `json:"priority"`
	Attempts        int               `json:"attempts"`
	MaxAttempts     int               `json:"max_attempts"`
	NotBefore       *time.Time        `json:"not_before,omitempty"`
	Owner           string            `json:"owner,omitempty"`
	Token           uint64            `json:"token"`
	LeaseUntil      *time.Time        `json:"lease_until,omitempty"`
	Progress        json.RawMessage   `json:"progress,omitempty"`
	Result          json.RawMessage   `json:"result,omitempty"`
	LastError       string            `json:"last_error,omitempty"`
	IdempotencyKey  string            `json:"idempotency_key,omitempty"`
	BackoffBase     string            `json:"backoff_base"`
	BackoffMax      string            `json:"backoff_max"`
	CreatedAt       time.Time         `json:"created_at"`
	UpdatedAt       time.Time         `json:"updated_at"`
	Errors          []attemptJSON     `json:"errors,omitempty"`
	WaitingOn       []uint64          `json:"waiting_on,omitempty"`
	Dependents      []uint64          `json:"dependents,omitempty"`
	OnParentFailure string            `json:"on_parent_failure,omitempty"`
	Partition       string            `json:"partition,omitempty"`
}

func taskOf(t engine.TaskInfo) taskJSON {
	out := taskJSON{
		ID: t.ID, Namespace: nsOf(t.Namespace), Queue: t.Queue, Kind: t.Kind, State: t.State.String(),
		Payload: rawJSON(t.Payload), Headers: t.Headers, Priority: t.Priority, Attempts: t.Attempts, MaxAttempts: t.MaxAttempts,
		NotBefore: timePtr(t.NotBefore), Owner: t.Owner, Token: t.Token, LeaseUntil: timePtr(t.LeaseUntil),
		Progress: rawJSON(t.Progress), Result: rawJSON(t.Result), LastError: t.LastError, IdempotencyKey: t.IdempotencyKey,
		BackoffBase: t.BackoffBase.String(), BackoffMax: t.BackoffMax.String(), CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		Partition: t.Partition,
	}
	for _, e := range t.Errors {
		out.Errors = append(out.Errors, attemptJSON{e.Attempt, e.At, e.Error})
	}
	out.WaitingOn, out.Dependents = t.WaitingOn, t.Dependents
	if t.State == engine.Waiting || t.OnParentFailure != engine.CancelOnFailure {
		out.OnParentFailure = t.OnParentFailure.String()
	}
	return out
}

// idList renders task ids as "12, 13, 14", the middle of a long list left
// out.
func idList(ids []uint64) string {
	const most = 20
	var parts []string
	for i, id := range ids {
		if len(ids) > most && i == most-2 {
			parts = append(parts, fmt.Sprintf("... (%d more)", len(ids)-most+1))
			parts = append(parts, fmt.Sprint(ids[len(ids)-1]))
			break
		}
		parts = append(parts, fmt.Sprint(id))
	}
	return strings.Join(parts, ", ")
}

// rawJSON is b as JSON: b itself when it is JSON (the engine keeps only
// JSON in these fields), quoted otherwise, and nothing when empty.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	q, _ := json.Marshal(string(b))
	return q
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

type pageJSON struct {
	Tasks []taskJSON `json:"tasks"`
	Next  string     `json:"next,omitempty"`
}

func pageOf(p engine.Page) pageJSON {
	out := pageJSON{Tasks: []taskJSON{}, Next: p.Next}
	for _, t := range p.Tasks {
		out.Tasks = append(out.Tasks, taskOf(t))
	}
	return out
}

type entryJSON struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`        // the value, when it is UTF-8 text
	ValueBase64 []byte  `json:"value_base64,omitempty"` // otherwise
	Version     uint64  `json:"version"`
}

func entryOf(e engine.Entry) entryJSON {
	out := entryJSON{Key: e.Key, Version: e.Version}
	if utf8.Valid(e.Value) {
		s := string(e.Value)
		out.Value = &s
	} else {
		out.ValueBase64 = e.Value
	}
	return out
}

const timeLayout = "2006-01-02 15:04:05.000"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

// printTasks prints tasks as a table, one line each.
func printTasks(w io.Writer, tasks []engine.TaskInfo) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tstate\tprio\tattempts\tnot before\towner\tpayload\tlast error")
	for _, t := range tasks {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d/%d\t%s\t%s\t%.60s\t%.80s\n", t.ID, t.State, t.Priority, t.Attempts, t.MaxAttempts,
			fmtTime(t.NotBefore), oneLine(t.Owner), oneLine(string(t.Payload)), oneLine(t.LastError))
	}
	tw.Flush()
}

// oneLine keeps a table row on one line: control characters (a newline in
// an error text) are shown escaped.
func oneLine(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0 {
		return s
	}
	q := fmt.Sprintf("%q", s)
	return q[1 : len(q)-1]
}

// printTask prints everything about one task, the JSON fields indented.
func printTask(w io.Writer, t engine.TaskInfo) {
	fmt.Fprintf(w, "task %d in %s %s: %s\n", t.ID, t.Namespace, t.Queue, t.State)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "  %s\t%s\n", k, oneLine(v))
		}
	}
	row("kind", t.Kind)
	row("partition", t.Partition)
	row("priority", fmt.Sprint(t.Priority))
	row("attempts", fmt.Sprintf("%d of %d", t.Attempts, t.MaxAttempts))
	row("backoff", fmt.Sprintf("%v doubling, at most %v", t.BackoffBase, t.BackoffMax))
	row("not before", fmtTime(t.NotBefore))
	row("owner", t.Owner)
	if t.Owner != "" || !t.LeaseUntil.IsZero() {
		row("lease until", fmtTime(t.LeaseUntil))
		row("token", fmt.Sprint(t.Token))
	}
	row("idempotency key", t.IdempotencyKey)
	for _, k := range slices.Sorted(maps.Keys(t.Headers)) {
		row("header "+k, t.Headers[k])
	}
	row("created", fmtTime(t.CreatedAt))
	row("updated", fmtTime(t.UpdatedAt))
	row("last error", t.LastError)
	if t.State == engine.Waiting {
		row("waiting on", idList(t.WaitingOn))
	}
	if t.State == engine.Waiting || t.OnParentFailure != engine.CancelOnFailure {
		row("if one fails", map[engine.DependencyPolicy]string{engine.CancelOnFailure: "cancel this task",
			engine.WaitOnFailure: "wait for a redrive", engine.RunOnFailure: "run anyway"}[t.OnParentFailure])
	}
	if len(t.Dependents) > 0 {
		n := fmt.Sprint(len(t.Dependents))
		if len(t.Dependents) == engine.MaxBatch {
			n = fmt.Sprintf("at least %d", engine.MaxBatch)
		}
		row("dependents", n+": "+idList(t.Dependents))
	}
	tw.Flush()
	block := func(name string, b []byte) {
		if len(b) == 0 {
			return
		}
		fmt.Fprintf(w, "%s:\n", name)
		var buf bytes.Buffer
		if json.Indent(&buf, b, "  ", "  ") != nil {
			buf.Reset()
			buf.Write(b)
		}
		fmt.Fprintf(w, "  %s\n", buf.String())
	}
	block("payload", t.Payload)
	block("progress", t.Progress)
	block("result", t.Result)
	if len(t.Errors) > 0 {
		fmt.Fprintln(w, "failed attempts:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, e := range t.Errors {
			fmt.Fprintf(tw, "  %d\t%s\t%s\n", e.Attempt, fmtTime(e.At), oneLine(e.Error))
		}
		tw.Flush()
	}
}
