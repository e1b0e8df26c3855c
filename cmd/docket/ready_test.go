package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadyLineFields: the ready line names ui and metrics only when they
// are served, https with TLS, and a wildcard host by its loopback address.
func TestReadyLineFields(t *testing.T) {
	a := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 43211}
	l := newReadyLine(a, false, false, false)
	if l.Event != "ready" || l.URL != "http://127.0.0.1:43211" || l.Listen != "127.0.0.1:43211" || l.TLS || l.PID != os.Getpid() {
		t.Fatalf("plain: %+v", l)
	}
	if l.UI != "" || l.Metrics != "" || l.Raft != "" || l.ID != "" {
		t.Fatalf("fields for what is not served: %+v", l)
	}
	l = newReadyLine(a, true, true, true)
	if l.URL != "https://127.0.0.1:43211" || !l.TLS || l.UI != "https://127.0.0.1:43211/ui/" || l.Metrics != "https://127.0.0.1:43211/metrics" {
		t.Fatalf("with TLS, -ui and -metrics: %+v", l)
	}
	for _, tc := range []struct {
		ip        net.IP
		url, addr string
	}{
		{net.IPv4zero, "http://127.0.0.1:7070", "0.0.0.0:7070"},
		{net.IPv6unspecified, "http://[::1]:7070", "[::]:7070"},
	} {
		l = newReadyLine(&net.TCPAddr{IP: tc.ip, Port: 7070}, false, false, false)
		if l.URL != tc.url || l.Listen != tc.addr {
			t.Errorf("bound to %s: url %q listen %q, want %q %q", tc.addr, l.URL, l.Listen, tc.url, tc.addr)
		}
	}
}

// TestServeReadyLine: serve prints its ready line on stdout once it
// answers, with ui and metrics only when served, and nothing else there,
// whatever it logs, up to its clean stop.
func TestServeReadyLine(t *testing.T) {
	s := serveInProcess(t, "-dir", dataDir(t))
	if s.ready.UI != "" || s.ready.Metrics != "" || s.ready.Raft != "" || s.ready.TLS {
		t.Errorf("ready line for a plain server: %+v", s.ready)
	}
	if !strings.HasPrefix(s.ready.URL, "http://127.0.0.1:") || s.ready.URL != "http://"+s.ready.Listen || strings.HasSuffix(s.ready.Listen, ":0") {
		t.Errorf("ready line addresses: %+v", s.ready)
	}
	if code, _, _ := get(t, s.base, "/healthz", ""); code != 200 {
		t.Fatalf("/healthz at the ready line's url: %d", code)
	}
	if code := s.shutdown(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log.String())
	}
	if out := s.out.String(); strings.Count(out, "\n") != 1 {
		t.Errorf("stdout holds more than the ready line:\n%s", out)
	}

	s = serveInProcess(t, "-dir", dataDir(t), "-ui", "-metrics")
	if s.ready.UI != s.base+"/ui/" || s.ready.Metrics != s.base+"/metrics" {
		t.Fatalf("ready line with -ui and -metrics: %+v", s.ready)
	}
	for _, u := range []string{s.ready.UI, s.ready.Metrics} {
		if code, _, _ := get(t, u, "", ""); code != 200 {
			t.Errorf("GET %s: %d", u, code)
		}
	}
}

// TestServeReadyLineRaft: a node's ready line names its raft address (the
// port picked for -raft 127.0.0.1:0) and its id.
func TestServeReadyLineRaft(t *testing.T) {
	n := startNode(t, filepath.Join(t.TempDir(), "n1"), "n1", "-bootstrap")
	host, port, err := net.SplitHostPort(n.ready.Raft)
	if err != nil || host != "127.0.0.1" || port == "0" || n.ready.ID != "n1" {
		t.Fatalf("ready line of a node: %+v", n.ready)
	}
	if n.ready.Raft == n.ready.Listen {
		t.Fatalf("raft and the API on one address: %+v", n.ready)
	}
	// raft listens there.
	c, err := net.Dial("tcp", n.ready.Raft)
	if err != nil {
		t.Fatalf("raft address of the ready line: %v", err)
	}
	c.Close()
}

// TestServeAddrFileRefused: an -addr-file serve cannot write stops it at
// once, before it opens the directory or listens, saying why.
func TestServeAddrFileRefused(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	isDir := filepath.Join(base, "adir")
	if err := os.Mkdir(isDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{filepath.Join(base, "missing", "addr.json"), "-addr-file " + filepath.Join(base, "missing", "addr.json") + ": cannot write in its directory: no such file or directory"},
		{isDir, "-addr-file " + isDir + " is a directory"},
	} {
		code, out, errs := docket(t, "serve", "-listen", "127.0.0.1:0", "-dir", dir, "-addr-file", tc.path)
		if code != 1 || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("-addr-file %s: exit %d, stdout %q, stderr %q; want exit 1 saying %q", tc.path, code, out, errs, tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("-addr-file %s: the data directory was made (%v)", tc.path, err)
		}
	}
	if ents, _ := os.ReadDir(isDir); len(ents) != 0 {
		t.Errorf("left behind in the directory: %v", ents)
	}
}

// TestAddrFile: publish renames the line into place; a rename that fails
// is an error that leaves no temporary file; remove takes away the file
// only while it holds this server's line, and an unpublished temporary
// file always.
func TestAddrFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "addr.json")
	entries := func() []string {
		var names []string
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}

	f, err := openAddrFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(`{"event":"ready"}` + "\n")
	if err := f.publish(line); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != string(line) {
		t.Fatalf("after publish: %q, %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	if got := entries(); len(got) != 1 {
		t.Fatalf("after publish the directory holds %v", got)
	}
	f.remove()
	if got := entries(); len(got) != 0 {
		t.Fatalf("after remove the directory holds %v", got)
	}

	// A newer server's line stays.
	f, _ = openAddrFile(path)
	f.publish(line)
	os.WriteFile(path, []byte(`{"event":"ready","pid":2}`+"\n"), 0o644)
	f.remove()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("remove took away another server's file: %v", err)
	}
	os.Remove(path)

	// Never ready: the temporary file goes.
	f, _ = openAddrFile(path)
	f.remove()
	if got := entries(); len(got) != 0 {
		t.Fatalf("an unpublished addr file left %v", got)
	}

	// The path became a directory with something in it: rename fails.
	f, _ = openAddrFile(path)
	os.MkdirAll(filepath.Join(path, "x"), 0o755)
	if err := f.publish(line); err == nil || !strings.Contains(err.Error(), "-addr-file "+path) {
		t.Fatalf("publish over a directory: %v", err)
	}
	if got := entries(); len(got) != 1 || got[0] != "addr.json" {
		t.Fatalf("a failed publish left %v", got)
	}
	f.remove()
	if _, err := os.Stat(filepath.Join(path, "x")); err != nil {
		t.Fatalf("remove after a failed publish touched the path: %v", err)
	}
}
