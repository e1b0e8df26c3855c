package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A local cluster of `docket serve` processes on loopback, for the
// cluster benchmark (docket cluster bench) and the failure tests: each node
// keeps its ports across restarts, so that clients and peers find it again.

// nodeProc is one `docket serve` process of a local cluster.
type nodeProc struct {
	bin      string
	id, dir  string
	httpPort int
	raftPort int
	url      string   // http://127.0.0.1:httpPort
	args     []string // the flags of every start (-raft-peer, -retain-completed...)
	log      io.Writer

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

func (p *nodeProc) raftAddr() string { return "127.0.0.1:" + strconv.Itoa(p.raftPort) }

// start starts the process with p.args and extra (-bootstrap, -join) and
// returns at once; waitReady waits until it takes calls.
func (p *nodeProc) start(extra ...string) error {
	args := []string{"serve", "-dir", p.dir, "-listen", "127.0.0.1:" + strconv.Itoa(p.httpPort)}
	if p.raftPort != 0 {
		args = append(args, "-raft", p.raftAddr(), "-id", p.id)
	}
	args = append(append(args, p.args...), extra...)
	p.cmd = exec.Command(p.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		return err
	}
	p.exited = make(chan struct{})
	cmd, exited := p.cmd, p.exited
	go func() {
		p.err = cmd.Wait()
		close(exited)
	}()
	return nil
}

// running reports whether the process is up.
func (p *nodeProc) running() bool {
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop ends the process with sig (SIGKILL: a crash; SIGTERM: a clean
// stop) and waits for it, at most 60 s.
func (p *nodeProc) stop(sig syscall.Signal) error {
	if !p.running() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within 60 s of %v", p.id, sig)
	}
}

// waitReady polls the node's /readyz until it answers 200 (it serves and
// knows a leader), the process exits, or ctx ends.
func (p *nodeProc) waitReady(ctx context.Context) error {
	hc := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, "GET", p.url+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w", p.id, ctx.Err())
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready: %v", p.id, p.err)
		case <-tick.C:
		}
	}
}

// freePorts returns n distinct loopback ports that are free now, taken
// below the kernel's range of ephemeral ports: a restarted node binds its
// port again, and a port in that range may meanwhile have become the
// local end of some outgoing connection.
func freePorts(n int) ([]int, error) {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				low = v
			}
		}
	}
	seen := map[int]bool{}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000 {
			return nil, errors.New("no free loopback ports found")
		}
		p := 10000 + rand.N(low-10000)
		if seen[p] {
			continue
		}
		seen[p] = true
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		out = append(out, p)
	}
	return out, nil
}
