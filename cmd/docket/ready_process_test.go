//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestServeProcessAddrFile: `docket serve -listen 127.0.0.1:0 -addr-file F`
// prints its ready line on stdout, F holds the same line by then, the URL
// answers, and a clean stop removes F and prints nothing more.
func TestServeProcessAddrFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "docket.addr")
	p := startServe(t, "-dir", filepath.Join(t.TempDir(), "data"), "-addr-file", f)
	line := p.out.String()
	b, err := os.ReadFile(f)
	if err != nil || string(b) != line {
		t.Fatalf("-addr-file holds %q (%v); stdout %q", b, err, line)
	}
	if p.ready.PID != p.cmd.Process.Pid {
		t.Errorf("pid %d, the process is %d", p.ready.PID, p.cmd.Process.Pid)
	}
	if code, _, body := get(t, p.base, "/healthz", ""); code != 200 {
		t.Fatalf("/healthz at %s: %d %s", p.base, code, body)
	}
	p.signal(t, syscall.SIGTERM)
	if p.err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", p.err, p.log.String())
	}
	if _, err := os.Stat(f); !os.IsNotExist(err) {
		t.Errorf("-addr-file still there after a clean stop (%v)", err)
	}
	if out := p.out.String(); out != line {
		t.Errorf("stdout holds more than the ready line:\n%s", out)
	}
}
