package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Serve is the System of runs through the client against a `docket serve`
// process (Config.ServeBinary).
const Serve = "docket-serve"

// Process is a server run as a child process for a benchmark: `docket
// serve`, or a peer's server. Its stdout lines are handed to whoever waits
// for them (the ready line), its stderr is kept (the last 16 KiB) for the
// error of a failed start or of an exit nobody asked for. On Linux the
// child is killed when the process that started it dies, whatever kills
// it; Stop ends it otherwise.
type Process struct {
	Name  string
	cmd   *exec.Cmd
	lines chan string
	log   *tailBuffer
	done  chan struct{} // closed once the child has exited and been waited for
	err   error         // Wait's, set before done is closed

	mu      sync.Mutex
	stopped bool
}

// processStopGrace is how long Stop lets a child end on SIGTERM before it
// kills it.
const processStopGrace = 10 * time.Second

// StartProcess starts bin with args. The child's stdout lines can be read
// with Line, its stderr is kept for errors.
func StartProcess(name, bin string, args ...string) (*Process, error) {
	p := &Process{Name: name, lines: make(chan string, 16), log: &tailBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.log
	p.cmd.SysProcAttr = childAttr()
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody reads: drop it rather than block the child
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() {
		<-read // Wait closes the pipe: read it to its end first
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID is the child's process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Line returns the next line the child writes on stdout; an error if it
// exits first or ctx ends.
func (p *Process) Line(ctx context.Context) (string, error) {
	select {
	case l := <-p.lines:
		return l, nil
	case <-p.done:
		select {
		case l := <-p.lines:
			return l, nil
		default:
		}
		return "", p.exitError()
	case <-ctx.Done():
		return "", fmt.Errorf("%s: %w%s", p.Name, ctx.Err(), p.logTail())
	}
}

// Exited is closed once the child has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

func (p *Process) exitError() error {
	return fmt.Errorf("%s exited: %v%s", p.Name, p.err, p.logTail())
}

func (p *Process) logTail() string {
	if s := strings.TrimSpace(p.log.String()); s != "" {
		return "\n--- " + p.Name + " stderr:\n" + s
	}
	return ""
}

// CPU is the CPU time (user and system) the child has used so far: from
// /proc while it runs (clock ticks, 10 ms on most Linux systems), from its
// rusage once it has exited; 0 where neither says.
func (p *Process) CPU() time.Duration {
	select {
	case <-p.done:
		if ps := p.cmd.ProcessState; ps != nil {
			return ps.UserTime() + ps.SystemTime()
		}
		return 0
	default:
	}
	return childCPU(p.PID())
}

// Stop ends the child: SIGTERM, then SIGKILL if it has not exited within
// processStopGrace. It returns an error if the child had exited before
// Stop was called (it died under the benchmark), with its stderr's tail;
// an exit on the signal is not one.
func (p *Process) Stop() error {
	p.mu.Lock()
	already := p.stopped
	p.stopped = true
	p.mu.Unlock()
	if already {
		<-p.done
		return nil
	}
	select {
	case <-p.done:
		return p.exitError()
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.cmd.Process.Kill()
	}
	select {
	case <-p.done:
	case <-time.After(processStopGrace):
		p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}

// Kill ends the child at once.
func (p *Process) Kill() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.cmd.Process.Kill()
	<-p.done
}

// GoBuild builds the main package pkg (an import path the module of the
// current directory can resolve) into dir/name and returns its path.
func GoBuild(ctx context.Context, pkg, dir, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b.String())
	}
	return out, nil
}

// DocketPackage is the import path of the docket command.
const DocketPackage = "github.com/docketdb/docket/cmd/docket"

// serveReady is the part of `docket serve`'s ready line the benchmark
// reads.
type serveReady struct {
	Event string `json:"event"`
	URL   string `json:"url"`
	PID   int    `json:"pid"`
}

// serveReadyTimeout bounds how long `docket serve` may take to print its
// ready line.
const serveReadyTimeout = 60 * time.Second

// StartServe starts `bin serve` over dataDir (made if missing) with
// durability ("always", "never"), on a fresh port of 127.0.0.1, with extra
// flags after the benchmark's, and waits for its ready line. It returns
// the process and the URL it serves.
func StartServe(ctx context.Context, bin, dataDir, durability string, extra ...string) (*Process, string, error) {
	args := append([]string{"serve", "-dir", dataDir, "-listen", "127.0.0.1:0", "-durability", durability,
		"-log-level", "warn"}, extra...)
	p, err := StartProcess("docket serve", bin, args...)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, serveReadyTimeout)
	defer cancel()
	for {
		l, err := p.Line(ctx)
		if err != nil {
			p.Kill()
			return nil, "", err
		}
		var r serveReady
		if json.Unmarshal([]byte(l), &r) == nil && r.Event == "ready" {
			if r.URL == "" || r.PID != p.PID() {
				p.Kill()
				return nil, "", fmt.Errorf("docket serve: ready line without a URL or with another pid: %s", l)
			}
			return p, r.URL, nil
		}
	}
}

// tailBuffer keeps the last bytes written to it, for an error message.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 16<<10 {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-8<<10:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// procCPU reads utime and stime, in clock ticks, from the text of
// /proc/PID/stat.
func procCPU(stat []byte) (ticks uint64, err error) {
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no command name in %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the command name", len(f))
	}
	var u, s uint64
	if _, err := fmt.Sscan(f[11], &u); err != nil {
		return 0, fmt.Errorf("stat: utime %q", f[11])
	}
	if _, err := fmt.Sscan(f[12], &s); err != nil {
		return 0, fmt.Errorf("stat: stime %q", f[12])
	}
	return u + s, nil
}

// clockTick is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// architecture Go supports.
const clockTick = 10 * time.Millisecond

func childCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	t, err := procCPU(b)
	if err != nil {
		return 0
	}
	return time.Duration(t) * clockTick
}
