//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// The tests here build the docket binary and run `docket serve` as a real
// process, to send it real signals and kill it outright. They are left out
// of -short.

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// docketBinary builds the docket command once per test run.
func docketBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the docket binary and runs it as a process")
	}
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "docket-bin-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "docket")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a running `docket serve` process.
type proc struct {
	cmd    *exec.Cmd
	log    *logLines // its stderr
	out    *logLines // its stdout: the ready line, nothing else
	ready  readyLine
	base   string // http://127.0.0.1:port, the url of its ready line
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

// startServe starts `docket serve -listen 127.0.0.1:0 args...` and returns
// once its ready line says where it listens.
func startServe(t *testing.T, args ...string) *proc {
	t.Helper()
	return startServeOn(t, "127.0.0.1:0", args...)
}

// startServeOn is startServe listening on addr.
func startServeOn(t *testing.T, addr string, args ...string) *proc {
	t.Helper()
	p := &proc{log: newLogLines(), out: newLogLines(), exited: make(chan struct{})}
	p.cmd = exec.Command(docketBinary(t), append([]string{"serve", "-listen", addr}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	line, ok := p.out.firstLine(p.exited, 30*time.Second)
	if !ok {
		t.Fatalf("serve gave no ready line:\n%s", p.log.String())
	}
	p.ready = parseReadyLine(t, line)
	p.base = p.ready.URL
	return p
}

// waitLog waits until the log holds s and returns the log; it fails the
// test if the process exits first or nothing comes for a long while.
func (p *proc) waitLog(t *testing.T, s string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		p.log.mu.Lock()
		text, wake := p.log.buf.String(), p.log.wake
		p.log.mu.Unlock()
		if strings.Contains(text, s) {
			return text
		}
		select {
		case <-wake:
		case <-p.exited:
			if text := p.log.String(); !strings.Contains(text, s) {
				t.Fatalf("serve exited (%v) before its log said %q:\n%s", p.err, s, text)
			}
		case <-deadline:
			t.Fatalf("the log never said %q:\n%s", s, p.log.String())
		}
	}
}

// signal sends sig and, for a signal that ends the process, waits for it.
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if sig == syscall.SIGHUP {
		return
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not end after %v:\n%s", sig, p.log.String())
	}
}

// TestServeProcessSignals: SIGHUP re-reads the tokens file, SIGTERM drains
// and exits 0 with the engine closed.
func TestServeProcessSignals(t *testing.T) {
	dir := dataDir(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	oldTok, oldLine, _ := server.NewToken("ops", "*/*:read")
	newTok, newLine, _ := server.NewToken("ops2", "*/*:read")
	os.WriteFile(tokens, []byte(oldLine+"\n"), 0o600)
	p := startServe(t, "-dir", dir, "-tokens", tokens, "-metrics")
	want := `docket_tasks{project="demo",queue="emails",scope="local",state="ready"} 2`
	if code, _, body := get(t, p.base, "/metrics", oldTok); code != 200 || !strings.Contains(body, want) {
		t.Fatalf("metrics: %d", code)
	}
	os.WriteFile(tokens, []byte(newLine+"\n"), 0o600)
	p.signal(t, syscall.SIGHUP)
	p.waitLog(t, "docket: tokens reloaded")
	if code, _, _ := get(t, p.base, "/metrics", oldTok); code != 401 {
		t.Fatalf("the old token after SIGHUP: %d", code)
	}
	if code, _, _ := get(t, p.base, "/metrics", newTok); code != 200 {
		t.Fatalf("the new token after SIGHUP: %d", code)
	}
	p.signal(t, syscall.SIGTERM)
	if p.err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", p.err, p.log.String())
	}
	if !strings.Contains(p.log.String(), "docket: stopped serving") {
		t.Fatalf("no clean stop in the log:\n%s", p.log.String())
	}
	db, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatalf("after SIGTERM the directory does not open: %v", err)
	}
	db.Close()
}
