package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// ErrExposed is returned by CheckExposure for a listen address that other
// machines can reach while calls would travel in clear or unauthenticated.
var ErrExposed = errors.New("docket: refusing to serve beyond loopback without TLS and tokens")

// IsLoopback reports whether the listen address addr (host:port) accepts
// connections from this machine only. An empty host ("":7070) listens on
// every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckExposure refuses a non-loopback listen address unless both TLS and
// tokens are configured or insecure is set, and says which is missing.
func CheckExposure(addr string, haveTLS, haveTokens, insecure bool) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("docket: listen address %q: %w", addr, err)
	}
	if IsLoopback(addr) || insecure || (haveTLS && haveTokens) {
		return nil
	}
	var missing []string
	if !haveTLS {
		missing = append(missing, "TLS (-tls-cert and -tls-key)")
	}
	if !haveTokens {
		missing = append(missing, "bearer tokens (-tokens)")
	}
	return fmt.Errorf("%w: %s is reachable from other machines and has no %s; listen on 127.0.0.1, configure them, or pass -insecure",
		ErrExposed, addr, strings.Join(missing, " and no "))
}

// TLSFiles loads a certificate and key, and optionally a CA whose client
// certificates are then required (mutual TLS). Reload re-reads them; a
// failed reload keeps the pair in force.
type TLSFiles struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, makes every client present a certificate
	// signed by one of its CAs.
	ClientCAFile string

	mu   sync.RWMutex
	cert *tls.Certificate
	pool *x509.CertPool
}

// Load reads the files for the first time.
func (f *TLSFiles) Load() error { return f.Reload() }

// Reload re-reads the certificate, key and client CAs.
func (f *TLSFiles) Reload() error {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return fmt.Errorf("docket: TLS certificate: %w", err)
	}
	var pool *x509.CertPool
	if f.ClientCAFile != "" {
		pem, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return fmt.Errorf("docket: client CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("docket: client CA %s: no PEM certificate in it", f.ClientCAFile)
		}
	}
	f.mu.Lock()
	f.cert, f.pool = &cert, pool
	f.mu.Unlock()
	return nil
}

// Config returns a TLS configuration that serves the certificate in force
// (so a reload takes effect for new connections).
func (f *TLSFiles) Config() *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			f.mu.RLock()
			defer f.mu.RUnlock()
			return f.cert, nil
		},
	}
	if f.ClientCAFile != "" {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			f.mu.RLock()
			pool := f.pool
			f.mu.RUnlock()
			c := cfg.Clone()
			c.GetConfigForClient = nil
			c.ClientCAs = pool
			return c, nil
		}
	}
	return cfg
}

// Timeouts of the HTTP server against slow or idle clients. There is no
// write timeout: a long-poll claim answers when its own deadline passes.
const (
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 64 << 10
)

// NewHTTPServer returns an http.Server for h with docket's timeouts and
// header limit, and tlsConfig (nil for plain HTTP/1.1 and h2c).
func NewHTTPServer(h http.Handler, tlsConfig *tls.Config) *http.Server {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
	if tlsConfig == nil {
		// gRPC clients speak HTTP/2 without TLS (h2c).
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		srv.Protocols = &p
	}
	return srv
}
