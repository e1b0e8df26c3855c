package testrun

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestWaiting: a test binary run through Waiting runs 2×GOMAXPROCS tests
// at once unless -parallel is given, which wins.
func TestWaiting(t *testing.T) {
	if os.Getenv("TESTRUN_CHILD") != "" {
		return
	}
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 2 * runtime.GOMAXPROCS(0)},
		{[]string{"-test.parallel=3"}, 3},
	} {
		args := append([]string{"-test.run=^TestParallelSeen$", "-test.v"}, c.args...)
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "TESTRUN_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, out)
		}
		if !strings.Contains(string(out), "parallel="+strconv.Itoa(c.want)+"\n") {
			t.Errorf("%v: want parallel=%d in\n%s", c.args, c.want, out)
		}
	}
}

// TestParallelSeen prints the -parallel the child runs with.
func TestParallelSeen(t *testing.T) {
	if os.Getenv("TESTRUN_CHILD") == "" {
		t.Skip("run by TestWaiting")
	}
	t.Log("parallel=" + flag.Lookup("test.parallel").Value.String() + "\n")
}

func TestMain(m *testing.M) { Waiting(m) }

// TestShortScratch: with -short and no TMPDIR, scratch directories go to a
// directory of their own under /dev/shm, removed afterwards; without
// -short, or with TMPDIR set, nothing changes.
func TestShortScratch(t *testing.T) {
	if os.Getenv("TESTRUN_CHILD") != "" {
		return
	}
	if fi, err := os.Stat(shm); err != nil || !fi.IsDir() {
		t.Skipf("no %s here", shm)
	}
	for _, c := range []struct {
		args   []string
		tmpdir string // TMPDIR given, "" for none
		inShm  bool
	}{
		{[]string{"-test.short"}, "", true},
		{nil, "", false},
		{[]string{"-test.short"}, t.TempDir(), false},
	} {
		args := append([]string{"-test.run=^TestScratchSeen$", "-test.v"}, c.args...)
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "TESTRUN_CHILD=1")
		cmd.Env = slices.DeleteFunc(cmd.Env, func(e string) bool { return strings.HasPrefix(e, "TMPDIR=") })
		if c.tmpdir != "" {
			cmd.Env = append(cmd.Env, "TMPDIR="+c.tmpdir)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, out)
		}
		_, after, ok := strings.Cut(string(out), "scratch=")
		dir, _, _ := strings.Cut(after, "\n")
		switch {
		case !ok:
			t.Fatalf("%v: the child printed no scratch directory:\n%s", c.args, out)
		case c.inShm && !strings.HasPrefix(dir, filepath.Join(shm, "docket-test-")):
			t.Errorf("%v: scratch in %s, want a directory of its own under %s", c.args, dir, shm)
		case !c.inShm && c.tmpdir == "" && strings.HasPrefix(dir, shm):
			t.Errorf("%v (TMPDIR %q): scratch in %s, want it left where it was", c.args, c.tmpdir, dir)
		case c.tmpdir != "" && !strings.HasPrefix(dir, c.tmpdir):
			t.Errorf("%v: scratch in %s, not under the TMPDIR given, %s", c.args, dir, c.tmpdir)
		}
		if c.inShm {
			rel, _ := filepath.Rel(shm, dir)
			own := filepath.Join(shm, strings.Split(rel, string(filepath.Separator))[0])
			if _, err := os.Stat(own); !os.IsNotExist(err) {
				t.Errorf("%v: %s is left behind (%v)", c.args, own, err)
			}
		}
	}
}

// TestScratchSeen prints where the child's scratch directories are.
func TestScratchSeen(t *testing.T) {
	if os.Getenv("TESTRUN_CHILD") == "" {
		t.Skip("run by TestShortScratch")
	}
	t.Log("scratch=" + t.TempDir() + "\n")
}
