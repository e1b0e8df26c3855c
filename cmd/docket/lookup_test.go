package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
)

// TestGetByIDAlone: get finds a task by its id alone, in whichever queue
// and namespace it is; -ns narrows the search to a namespace, -queue names
// the queue; a task in none of them is not found (exit 1).
func TestGetByIDAlone(t *testing.T) {
	dir := dataDir(t)
	db, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Queue(engine.NS("acme", "prod"), "reports").Enqueue(ctx, engine.Task{Payload: []byte(`{"r":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	id := fmt.Sprint(res.ID)
	code, out, errs := docket(t, "get", "-dir", dir, id)
	if code != 0 || !strings.Contains(out, "task "+id+" in acme/prod reports: ready") || !strings.Contains(out, `"r": 1`) {
		t.Errorf("get %s: exit %d\n%s%s", id, code, out, errs)
	}
	if code, out, _ := docket(t, "get", "-dir", dir, "-ns", "acme/prod", "-json", id); code != 0 || !strings.Contains(out, `"queue": "reports"`) {
		t.Errorf("get -ns acme/prod %s: exit %d\n%s", id, code, out)
	}
	for _, args := range [][]string{
		{"get", "-dir", dir, "-ns", "demo/local", id},
		{"get", "-dir", dir, "-queue", "emails", id},
		{"get", "-dir", dir, "999"},
	} {
		if code, _, errs := docket(t, args...); code != 1 || !strings.Contains(errs, "not found") {
			t.Errorf("%v: exit %d, %q: want not found", args, code, errs)
		}
	}
}
