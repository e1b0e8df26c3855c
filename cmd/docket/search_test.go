package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestSearchAndBulkFromTheCommandLine runs search and bulk on a data
// directory and on a live server, over two copies of one queue: both
// print the same, refuse the same bad filters, and leave the same queue.
func TestSearchAndBulkFromTheCommandLine(t *testing.T) {
	dir := actionsDir(t)
	srv := serveInProcess(t, "-dir", actionsDir(t), "-retain-completed", "1h")
	script := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"search", "-state", "dead", "-error", "SMTP", "-count", "-json"}, 0, `"count": 3`},
		{[]string{"search", "-state", "dead", "-newest", "-limit", "1", "-json"}, 0, `"next": "6"`},
		{[]string{"search", "-state", "dead", "-min", "2", "-max", "4", "-count", "-json"}, 0, `"count": 3`},
		{[]string{"search", "-state", "scheduled", "-retrying", "not", "-older", "0s", "-count", "-json"}, 0, `"count": 2`},
		{[]string{"search", "-kind", "none", "-count"}, 0, "0 tasks match"},
		{[]string{"bulk", "-action", "retry", "-state", "dead", "-error", "smtp"}, 0, "3 tasks match (ids up to 3); add -yes -max 3 to retry them"},
		{[]string{"bulk", "-action", "retry", "-state", "dead", "-error", "smtp", "-max", "3", "-yes", "-json"}, 0, `"done": 3`},
		{[]string{"bulk", "-action", "delete", "-state", "dead,scheduled", "-yes"}, 0, "delete: 3 tasks\nskipped 2: not ended (cancel removes tasks still to run)"},
		{[]string{"bulk", "-action", "run-now", "-yes", "-json"}, 0, `"reason": "already ready"`},
		{[]string{"bulk", "-action", "explode"}, 2, ""},
		{[]string{"bulk", "-state", "dead"}, 2, ""},
		{[]string{"search", "-min", "9", "-max", "3"}, 2, ""},
		{[]string{"bulk", "-action", "cancel", "-header", "=x", "-yes"}, 2, ""},
		{[]string{"search", "-older", "yesterday"}, 2, ""},
		{[]string{"search", "-state", "sleeping"}, 2, ""},
	}
	times := regexp.MustCompile(`"(created_at|updated_at|not_before|at)": "[^"]*"`)
	for _, step := range script {
		var outs [2]string
		for i, where := range [][]string{{"-dir", dir}, {"-server", srv.base}} {
			code, out, errs := docket(t, append(step.args, where...)...)
			if code != step.code || !strings.Contains(out, step.want) {
				t.Fatalf("%q %s: exit %d (want %d), want %q in\n%s%s", step.args, where[0], code, step.code, step.want, out, errs)
			}
			outs[i] = out + errs
		}
		if times.ReplaceAllString(outs[0], "T") != times.ReplaceAllString(outs[1], "T") {
			t.Errorf("%q differs:\n-dir:    %s\n-server: %s", step.args, outs[0], outs[1])
		}
	}
	for i, where := range [][]string{{"-dir", dir}, {"-server", srv.base}} {
		_, out, _ := docket(t, append([]string{"stats", "-json"}, where...)...)
		st := decode[struct{ Queues []queueJSON }](t, out)
		if len(st.Queues) != 1 || st.Queues[0].Counts != (countsJSON{Ready: 6, Completed: 3}) {
			t.Errorf("%d: after the script: %s", i, out)
		}
	}
}
