package testrun

import (
	"flag"
	"os"
	"os/exec"
	"runtime"
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
