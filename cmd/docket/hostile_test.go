//go:build linux

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/docketdb/docket/internal/session"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// The hostile-input attacks on a real `docket serve` process, each bounded
// in time, with the figures they must stay within: the server's peak RSS
// at most hostileRSSBound above its RSS before the attack, and the p99 of
// a victim's enqueues (one at a time, on loopback, during the attack) at
// most hostileP99Bound.
const (
	hostileRSSBound = 64 << 20
	hostileP99Bound = 50 * time.Millisecond
	hostileFor      = 3 * time.Second
)

// procStatus returns a field of /proc/PID/status in bytes (VmRSS, VmHWM).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// resetPeak makes VmHWM start again from the current RSS.
func resetPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS of the server: %v", err)
	}
}

// hostileGzipBomb is a gzip stream of n zero bytes.
func hostileGzipBomb(n int64) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for ; n > 0; n -= int64(len(zeros)) {
		zw.Write(zeros[:min(n, int64(len(zeros)))])
	}
	zw.Close()
	return buf.Bytes()
}

// hostilePackedDeps is an EnqueueRequest whose task depends on n tasks,
// in one packed field of one-byte varints.
func hostilePackedDeps(n int) []byte {
	task := protowire.AppendTag(nil, 40, protowire.BytesType)
	task = protowire.AppendVarint(task, uint64(n))
	task = append(task, bytes.Repeat([]byte{1}, n)...)
	head, _ := proto.Marshal(&v1.EnqueueRequest{Namespace: &v1.Namespace{Project: "evil", Scope: "x"}, Queue: "q"})
	req := protowire.AppendTag(head, 3, protowire.BytesType)
	req = protowire.AppendVarint(req, uint64(len(task)))
	return append(req, task...)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// untilDone calls f in a loop on each of n goroutines until ctx ends.
func untilDone(ctx context.Context, n int, f func(ctx context.Context)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				f(ctx)
			}
		}()
	}
	return &wg
}

// postRaw posts body to the server and reads the answer, whatever it is.
func postRaw(ctx context.Context, hc *http.Client, url, contentType, encoding string, body io.Reader) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, body)
	req.Header.Set("Content-Type", contentType)
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

type attack struct {
	name string
	run  func(ctx context.Context) *sync.WaitGroup
}

// hostileConn dials addr and opens a session on it (the preface and a
// Hello), closed when ctx ends; nil if that failed.
func hostileConn(ctx context.Context, addr string) net.Conn {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	context.AfterFunc(ctx, func() { c.Close() })
	hello, _ := session.AppendFrame([]byte(session.Preface), &v1.Hello{Version: session.Version})
	if _, err := c.Write(hello); err != nil {
		c.Close()
		return nil
	}
	return c
}

// hostileSession opens a session on addr and writes b on it, then reads
// what the server answers until it closes the session or ctx ends.
func hostileSession(ctx context.Context, addr string, b []byte) {
	if c := hostileConn(ctx, addr); c != nil {
		defer c.Close()
		if _, err := c.Write(b); err == nil {
			io.Copy(io.Discard, c)
		}
	}
}

// hostileStream opens a session on addr and writes frame again and again,
// reading what the server answers meanwhile, until the server closes the
// session or ctx ends: a client that goes on sending calls the server
// refuses, each alone.
func hostileStream(ctx context.Context, addr string, frame []byte) {
	c := hostileConn(ctx, addr)
	if c == nil {
		return
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		io.Copy(io.Discard, c)
	}()
	for ctx.Err() == nil {
		if _, err := c.Write(frame); err != nil {
			break
		}
	}
	c.Close()
	<-read
}

// sessionAttacks are the attacks on the session transport.
func sessionAttacks(addr string) []attack {
	garbage := append(binary.AppendUvarint(nil, 64), bytes.Repeat([]byte{0xff}, 64)...)
	var parked []byte
	for i := range 4096 {
		parked, _ = session.AppendFrame(parked, &v1.Call{Id: uint64(i + 1), Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
			Namespace: &v1.Namespace{Project: "evil", Scope: "x"}, Queue: "empty", Owner: "w",
			Lease: durationpb.New(time.Minute), Max: 1, MaxWait: durationpb.New(time.Hour)}}})
	}
	// An Enqueue call whose task depends on 7 Mi tasks, in one packed
	// field: within the frame limit, over the element limits.
	deps := hostilePackedDeps(7 << 20)
	packed := protowire.AppendTag(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1), 10, protowire.BytesType)
	packed = protowire.AppendBytes(packed, deps)
	packed = append(binary.AppendUvarint(nil, uint64(len(packed))), packed...)
	large, _ := session.AppendFrame(nil, &v1.Call{Id: 1, Call: &v1.Call_KvGet{KvGet: &v1.KVGetRequest{
		Namespace: &v1.Namespace{Project: "evil", Scope: "x"}, Key: strings.Repeat("k", 7<<20)}}})
	// A 7 MiB payload: a value over the engine's payload limit (1 MiB).
	largeValue, _ := session.AppendFrame(nil, &v1.Call{Id: 1, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{
		Namespace: &v1.Namespace{Project: "evil", Scope: "x"}, Queue: "q", Task: &v1.Task{Payload: []byte(`"` + strings.Repeat("v", 7<<20) + `"`)}}}})
	return []attack{
		{"sessions: frames of garbage x8", func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, 8, func(ctx context.Context) { hostileSession(ctx, addr, garbage) })
		}},
		{"sessions: a 1 GiB frame length x8", func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, 8, func(ctx context.Context) { hostileSession(ctx, addr, binary.AppendUvarint(nil, 1<<30)) })
		}},
		{"sessions: 64 that never send their hello", func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, 64, func(ctx context.Context) {
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
				if err != nil {
					return
				}
				defer c.Close()
				stop := context.AfterFunc(ctx, func() { c.Close() })
				defer stop()
				c.Write([]byte(session.Preface))
				io.Copy(io.Discard, c)
			})
		}},
		{"sessions: 64 frames that never finish", func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, 64, func(ctx context.Context) { hostileSession(ctx, addr, append(binary.AppendUvarint(nil, 1<<20), 1)) })
		}},
		{"sessions: 4,096 waiting claims x2", func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, 2, func(ctx context.Context) { hostileSession(ctx, addr, parked) })
		}},
		{"sessions: packed depends_on of 7 Mi one-byte varints", func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, 1, func(ctx context.Context) { hostileStream(ctx, addr, packed) })
		}},
		{"sessions: 7 MiB frames x4", func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, 4, func(ctx context.Context) { hostileStream(ctx, addr, large) })
		}},
		{"sessions: 7 MiB payloads x4", func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, 4, func(ctx context.Context) { hostileStream(ctx, addr, largeValue) })
		}},
	}
}

// TestHostileInputsProcess runs each attack on the server's input against
// a `docket serve` process, while a victim enqueues, and holds the
// server's peak RSS and the victim's p99 to their bounds.
// DOCKET_HOSTILE_ONLY, if set, runs only the attacks whose names contain
// it (to measure one attack again and again).
func TestHostileInputsProcess(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("runs attacks for several seconds against a server process, and measures latency (not under -race)")
	}
	p := startServe(t, "-dir", filepath.Join(t.TempDir(), "data"), "-max-calls", "32", "-body-timeout", "2s")
	pid := p.cmd.Process.Pid
	api := p.base + "/docket.v1.Queues/Enqueue"
	victimHTTP := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer victimHTTP.CloseIdleConnections()
	victim := docketv1connect.NewQueuesClient(victimHTTP, p.base)
	enqueue := func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		_, err := victim.Enqueue(ctx, connect.NewRequest(&v1.EnqueueRequest{Namespace: &v1.Namespace{Project: "victim", Scope: "prod"},
			Queue: "q", Task: &v1.Task{Payload: []byte(`{"n":1}`)}}))
		return time.Since(start), err
	}
	for range 200 { // warm up: the server's steady state
		if _, err := enqueue(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// The victim's p99 with no attack: on a machine too busy for it to be
	// well under the bound, the p99 under attack measures the machine, and
	// is reported, not held to the bound.
	var quiet []time.Duration
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		d, err := enqueue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		quiet = append(quiet, d)
	}
	slices.Sort(quiet)
	quietP99 := quiet[len(quiet)*99/100]
	holdP99 := quietP99 < hostileP99Bound/10
	idle0 := procStatus(t, pid, "VmRSS")
	t.Logf("idle: RSS %.1f MiB; victim alone: %d enqueues, p99 %v (the p99 bound is held: %v)",
		float64(idle0)/(1<<20), len(quiet), quietP99.Round(10*time.Microsecond), holdP99)
	bomb := hostileGzipBomb(200 << 20)
	// JSON bodies within the request limit: a string longer than any field
	// may hold (a kind, a payload), and a payload of 7 MiB of short strings.
	jsonString := []byte(`{"namespace":{"project":"evil","scope":"x"},"queue":"q","task":{"kind":"` + strings.Repeat("k", 7<<20) + `"}}`)
	jsonArray := []byte(`{"namespace":{"project":"evil","scope":"x"},"queue":"q","task":{"payload":[` + strings.Repeat(`"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvv",`, 7<<20/32) + `1]}}`)
	jsonPayload := []byte(`{"namespace":{"project":"evil","scope":"x"},"queue":"q","task":{"payload":"` + strings.Repeat("v", 7<<20) + `"}}`)
	packed := hostilePackedDeps(24 << 20)
	attackHTTP := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer attackHTTP.CloseIdleConnections()

	// posts is an attack of n clients posting body again and again.
	posts := func(n int, contentType, encoding string, body []byte) func(context.Context) *sync.WaitGroup {
		return func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, n, func(ctx context.Context) {
				postRaw(ctx, attackHTTP, api, contentType, encoding, bytes.NewReader(body))
			})
		}
	}
	attacks := []attack{
		{fmt.Sprintf("gzip bomb (%d KiB inflating to 200 MiB) x6 at once", len(bomb)>>10), posts(6, "application/proto", "gzip", bomb)},
		{"packed depends_on of 24 Mi one-byte varints", posts(1, "application/proto", "", packed)},
		{"64 slow bodies (max-calls 32) that never finish", func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, 64, func(ctx context.Context) {
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp", strings.TrimPrefix(p.base, "http://"))
				if err != nil {
					return
				}
				defer c.Close()
				stop := context.AfterFunc(ctx, func() { c.Close() })
				defer stop()
				fmt.Fprintf(c, "POST /docket.v1.Queues/Enqueue HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/proto\r\nContent-Length: 1000000\r\n\r\nx")
				io.Copy(io.Discard, c) // until the server gives up on the body
			})
		}},
		{"endless chunked body x2", func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, 2, func(ctx context.Context) {
				postRaw(ctx, attackHTTP, api, "application/proto", "", zeros{})
			})
		}},
		{"JSON bodies of a 7 MiB string x2", posts(2, "application/json", "", jsonString)},
		{"JSON bodies of a 7 MiB payload array x2", posts(2, "application/json", "", jsonArray)},
		{"JSON bodies of a 7 MiB payload x2", posts(2, "application/json", "", jsonPayload)},
		{"1 GiB body with its Content-Length x2", func(ctx context.Context) *sync.WaitGroup {
			return untilDone(ctx, 2, func(ctx context.Context) {
				req, _ := http.NewRequestWithContext(ctx, "POST", api, io.LimitReader(zeros{}, 1<<30))
				req.ContentLength = 1 << 30
				req.Header.Set("Content-Type", "application/proto")
				if resp, err := attackHTTP.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}},
	}
	attacks = append(attacks, sessionAttacks(strings.TrimPrefix(p.base, "http://"))...)
	var report []string
	// measure runs attack a once and returns the server's peak RSS above
	// its RSS before, and the victim's p99 and failures.
	measure := func(a attack) (rise int64, p99 time.Duration, failed int64, firstErr error) {
		attackHTTP.CloseIdleConnections()
		resetPeak(t, pid)
		idle := procStatus(t, pid, "VmRSS")
		ctx, cancel := context.WithTimeout(context.Background(), hostileFor)
		wg := a.run(ctx)
		var lat []time.Duration
		for ctx.Err() == nil {
			d, err := enqueue(context.Background())
			if err != nil {
				if failed++; failed == 1 {
					firstErr = err
				}
				continue
			}
			lat = append(lat, d)
		}
		cancel()
		wg.Wait()
		peak := procStatus(t, pid, "VmHWM")
		slices.Sort(lat)
		p99 = time.Hour
		if len(lat) > 0 {
			p99 = lat[len(lat)*99/100]
		}
		line := fmt.Sprintf("%-50s idle RSS %5.1f MiB, peak %5.1f MiB (+%5.1f MiB; +%5.1f over the first idle); victim: %d enqueues, p99 %v, %d failed",
			a.name, float64(idle)/(1<<20), float64(peak)/(1<<20), float64(peak-idle)/(1<<20), float64(peak-idle0)/(1<<20),
			len(lat), p99.Round(10*time.Microsecond), failed)
		t.Log(line)
		report = append(report, line)
		return peak - idle, p99, failed, firstErr
	}
	for _, a := range attacks {
		if f := os.Getenv("DOCKET_HOSTILE_ONLY"); f != "" && !strings.Contains(a.name, f) {
			continue
		}
		// The machine's other load shows in the victim's latency: an
		// attack whose p99 is over the bound is run again, up to three
		// times in all; its RSS and failures are held on every run.
		for try := 1; ; try++ {
			rise, p99, failed, firstErr := measure(a)
			if rise > hostileRSSBound {
				t.Errorf("%s: the server's peak RSS rose %d MiB, over %d MiB", a.name, rise>>20, hostileRSSBound>>20)
			}
			if failed > 0 {
				t.Errorf("%s: %d of the victim's enqueues failed, the first: %v", a.name, failed, firstErr)
			}
			if !holdP99 || p99 <= hostileP99Bound {
				break
			}
			if try == 3 {
				t.Errorf("%s: the victim's enqueue p99 is %v, over %v, in three runs", a.name, p99, hostileP99Bound)
				break
			}
		}
	}
	if out := os.Getenv("DOCKET_HOSTILE_REPORT"); out != "" {
		os.WriteFile(out, []byte(strings.Join(report, "\n")+"\n"), 0o644)
	}
}
