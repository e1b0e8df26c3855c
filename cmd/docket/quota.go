package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/bytesize"
)

// A namespace's quota (engine.Quotas): the tasks and bytes its state may
// hold.

type quotaJSON struct {
	Namespace nsJSON `json:"namespace"`
	Quota     struct {
		MaxTasks int   `json:"max_tasks"`
		MaxBytes int64 `json:"max_bytes"`
	} `json:"quota"`
	Usage struct {
		Tasks int   `json:"tasks"`
		Bytes int64 `json:"bytes"`
	} `json:"usage"`
}

const quotaAbout = `
Shows a namespace's quota and what it holds now, or sets the quota with
-tasks and -bytes (each alone changes only its own limit; 0 or off removes
it). A write that would take the namespace past its quota (enqueue, batch,
KV set, a completion's follow-ups) is refused as full, and the other
namespaces do not notice; completing, cancelling and deleting always work,
and completions with follow-ups and worker presence may use an eighth of
the quota beyond it. A quota below what the namespace holds removes
nothing: it refuses what adds until enough is freed. Setting needs the
admin permission on the namespace.`

func runQuota(ctx context.Context, c cli, args []string) error {
	fs := newFlagsFor(c, "quota", "[-dir DIR | -server URL] [-ns P/S] [-tasks N] [-bytes SIZE] [-json]", quotaAbout)
	tf := addTargetFlags(c, fs, oneNS)
	tasks := fs.String("tasks", "", "at most this many tasks in the namespace, in every state (0 or off: no limit)")
	size := fs.String("bytes", "", "at most this many bytes of state in the namespace, such as 512MiB or 4GiB (0 or off: no limit)")
	if _, err := tf.parse(args, 0, 0); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	changing := set["tasks"] || set["bytes"]
	var maxTasks int
	var maxBytes int64
	if set["tasks"] && *tasks != "off" {
		n, err := strconv.Atoi(*tasks)
		if err != nil || n < 0 {
			return usageError{fmt.Sprintf("quota: -tasks wants a count of tasks (0 or off: no limit); got %q", *tasks)}
		}
		maxTasks = n
	}
	if set["bytes"] {
		n, err := bytesize.Parse(*size)
		if err != nil {
			return usageError{"quota: -bytes: " + err.Error()}
		}
		maxBytes = max(n, 0) // off: no limit
	}
	t, err := tf.open(ctx, changing)
	if err != nil {
		return err
	}
	defer t.Close()
	qs, ok := t.api.(engine.Quotas)
	if !ok {
		return fmt.Errorf("%w: %s keeps no namespace quotas", engine.ErrInvalid, t.where)
	}
	q, u, err := qs.Quota(ctx, t.ns)
	if err != nil {
		return err
	}
	if changing {
		if set["tasks"] {
			q.MaxTasks = maxTasks
		}
		if set["bytes"] {
			q.MaxBytes = maxBytes
		}
		if err := qs.SetQuota(ctx, t.ns, q); err != nil {
			return err
		}
		if q, u, err = qs.Quota(ctx, t.ns); err != nil {
			return err
		}
	}
	var j quotaJSON
	j.Namespace = nsOf(t.ns)
	j.Quota.MaxTasks, j.Quota.MaxBytes = q.MaxTasks, q.MaxBytes
	j.Usage.Tasks, j.Usage.Bytes = u.Tasks, u.Bytes
	if *tf.json {
		return writeJSON(c.stdout, j)
	}
	if changing {
		fmt.Fprintf(c.stdout, "quota of %s set\n", t.ns)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NAMESPACE\tTASKS\tBYTES\n")
	fmt.Fprintf(tw, "%s\t%s\t%s\n", t.ns,
		ofQuota(strconv.Itoa(u.Tasks), strconv.Itoa(q.MaxTasks), int64(u.Tasks), int64(q.MaxTasks)),
		ofQuota(bytesize.Format(u.Bytes), bytesize.Format(q.MaxBytes), u.Bytes, q.MaxBytes))
	return tw.Flush()
}

// ofQuota prints a usage against its limit: "12 of 100 (12%)", or "12 (no
// quota)".
func ofQuota(used, limit string, u, l int64) string {
	if l <= 0 {
		return used + " (no quota)"
	}
	return fmt.Sprintf("%s of %s (%d%%)", used, limit, u*100/l)
}
