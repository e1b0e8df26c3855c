package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docketdb/docket/engine"
)

func quiet() Options { return Options{Logger: slog.New(slog.DiscardHandler)} }

func TestRunRefusesBadConfigBeforeTouchingTheDirectory(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	os.WriteFile(filepath.Join(base, "bad-tokens"), []byte("nonsense\n"), 0o600)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"exposed", Config{Listen: ":0"}, "-insecure"},
		{"cert without key", Config{Listen: "127.0.0.1:0", TLSCert: "c.pem"}, "both a certificate and a key"},
		{"client CA without TLS", Config{Listen: "127.0.0.1:0", TLSClientCA: "ca.pem"}, "need TLS"},
		{"missing cert files", Config{Listen: "127.0.0.1:0", TLSCert: filepath.Join(base, "no.pem"), TLSKey: filepath.Join(base, "no.key")}, "TLS certificate"},
		{"bad tokens", Config{Listen: "127.0.0.1:0", TokensFile: filepath.Join(base, "bad-tokens")}, "line 1"},
		{"missing tokens", Config{Listen: "127.0.0.1:0", TokensFile: filepath.Join(base, "none")}, "no such file"},
		{"bad address", Config{Listen: "127.0.0.1"}, "listen address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Dir, tc.cfg.Server = dir, quiet()
			err := Run(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want it to say %q", err, tc.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the data directory was created by a refused start: %v", err)
			}
		})
	}
}

func TestRunServesReloadsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir, tokensFile := filepath.Join(base, "data"), filepath.Join(base, "tokens")
	tok1, line1, _ := NewToken("one", "a/b:read")
	tok2, line2, _ := NewToken("two", "a/b:read")
	os.WriteFile(tokensFile, []byte(line1+"\n"), 0o600)

	ctx, cancel := context.WithCancel(context.Background())
	reload := make(chan struct{})
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			Dir: dir, Listen: "127.0.0.1:0", TokensFile: tokensFile, Server: quiet(), Reload: reload,
			Listening: func(a net.Addr) { addrc <- a },
			Mount: func(_ *engine.DB, s *Server, mux *http.ServeMux) error {
				mux.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
					c, err := s.Caller(r)
					if err != nil {
						http.Error(w, "who?", 401)
						return
					}
					w.Write([]byte(c.ID))
				})
				return nil
			},
		})
	}()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatal(err)
	}
	base_ := "http://" + addr.String()
	get := func(path, tok string) (int, string) {
		req, _ := http.NewRequest("GET", base_+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz", ""); code != 200 {
		t.Fatalf("readyz: %d %s", code, body)
	}
	if _, body := get("/whoami", tok1); body != "one" {
		t.Fatalf("whoami with token one: %q", body)
	}
	os.WriteFile(tokensFile, []byte(line2+"\n"), 0o600)
	reload <- struct{}{}
	reload <- struct{}{} // the second send returns once the first reload is done
	if code, _ := get("/whoami", tok1); code != 401 {
		t.Fatalf("a removed token still works after reload: %d", code)
	}
	if _, body := get("/whoami", tok2); body != "two" {
		t.Fatalf("the new token: %q", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after a clean stop: %v", err)
	}
	db, err := engine.Open(dir, engine.Options{}) // the lock is released: the DB was closed
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
}

func TestRunRefusesALockedDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = Run(context.Background(), Config{Dir: dir, Listen: "127.0.0.1:0", Server: quiet()})
	if !errors.Is(err, engine.ErrLocked) {
		t.Fatalf("Run on a locked directory: %v", err)
	}
}
