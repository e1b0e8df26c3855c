package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckExposure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr                      string
		tls, tokens, insecure, ok bool
		want                      string
	}{
		{addr: "127.0.0.1:7070", ok: true},
		{addr: "[::1]:7070", ok: true},
		{addr: "localhost:7070", ok: true},
		{addr: ":7070", want: "no TLS (-tls-cert and -tls-key) and no bearer tokens (-tokens)"},
		{addr: "0.0.0.0:7070", tls: true, want: "no bearer tokens"},
		{addr: "10.0.0.1:7070", tokens: true, want: "no TLS"},
		{addr: "10.0.0.1:7070", tls: true, tokens: true, ok: true},
		{addr: ":7070", insecure: true, ok: true},
	} {
		err := CheckExposure(tc.addr, tc.tls, tc.tokens, tc.insecure)
		if tc.ok {
			if err != nil {
				t.Errorf("%+v: %v", tc, err)
			}
			continue
		}
		if !errors.Is(err, ErrExposed) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "-insecure") {
			t.Errorf("%+v: err = %v; want ErrExposed saying %q and naming -insecure", tc, err, tc.want)
		}
	}
	if err := CheckExposure("nonsense", false, false, true); err == nil {
		t.Error("a malformed address was accepted")
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 (a CA too) and
// its key, and returns the parsed certificate.
func writeCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  parent == nil,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	return cert, key, certFile, keyFile
}

func TestTLSFilesMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey, caFile, _ := writeCert(t, dir, "ca", nil, nil)
	_, _, srvCert, srvKey := writeCert(t, dir, "server", ca, caKey)
	_, _, cliCert, cliKey := writeCert(t, dir, "client", ca, caKey)
	other, otherKey, _, _ := writeCert(t, dir, "otherca", nil, nil)
	_, _, badCert, badKey := writeCert(t, dir, "stranger", other, otherKey)

	files := &TLSFiles{CertFile: srvCert, KeyFile: srvKey, ClientCAFile: caFile}
	if err := files.Load(); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.TLS.PeerCertificates[0].Subject.CommonName))
	}))
	ts.TLS = files.Config()
	ts.StartTLS()
	defer ts.Close()

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	get := func(certFile, keyFile string) (string, error) {
		cfg := &tls.Config{RootCAs: roots}
		if certFile != "" {
			pair, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		defer c.CloseIdleConnections()
		resp, err := c.Get(ts.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := get(cliCert, cliKey); err != nil || got != "client" {
		t.Fatalf("client with a certificate from the CA: %q, %v", got, err)
	}
	if _, err := get("", ""); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if _, err := get(badCert, badKey); err == nil {
		t.Fatal("a client with a certificate from another CA was served")
	}
}

func TestTLSFilesReloadKeepsPairOnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, _, certFile, keyFile := writeCert(t, dir, "a", nil, nil)
	files := &TLSFiles{CertFile: certFile, KeyFile: keyFile}
	if err := files.Load(); err != nil {
		t.Fatal(err)
	}
	before, _ := files.Config().GetCertificate(nil)
	os.WriteFile(certFile, []byte("garbage"), 0o600)
	if err := files.Reload(); err == nil {
		t.Fatal("a garbage certificate reloaded")
	}
	after, _ := files.Config().GetCertificate(nil)
	if before != after {
		t.Fatal("a failed reload replaced the certificate in force")
	}
	if err := (&TLSFiles{CertFile: certFile, KeyFile: keyFile, ClientCAFile: filepath.Join(dir, "missing")}).Load(); err == nil {
		t.Fatal("a missing client CA file loaded")
	}
	os.WriteFile(filepath.Join(dir, "empty.pem"), []byte("no pem here"), 0o600)
	_, _, certFile, keyFile = writeCert(t, dir, "b", nil, nil)
	if err := (&TLSFiles{CertFile: certFile, KeyFile: keyFile, ClientCAFile: filepath.Join(dir, "empty.pem")}).Load(); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Fatalf("a client CA file without PEM: %v", err)
	}
}

func TestLimiterPerCaller(t *testing.T) {
	t.Parallel()
	l := newLimiter(3, 1)
	var rel []func()
	for i := 0; i < 3; i++ {
		r, err := l.acquire("a")
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		rel = append(rel, r)
	}
	if _, err := l.acquire("a"); err == nil || !strings.Contains(err.Error(), "calls=3") || !strings.Contains(err.Error(), "-max-calls") {
		t.Fatalf("4th call of a: %v", err)
	}
	// A waiting claim holds a parked slot only: a caller at its call
	// limit may still park one.
	p, err := l.acquireParked("a")
	if err != nil {
		t.Fatalf("a parked claim of a caller at its call limit: %v", err)
	}
	if _, err := l.acquireParked("a"); err == nil || !strings.Contains(err.Error(), "parked=1") || !strings.Contains(err.Error(), "-max-parked") {
		t.Fatalf("2nd parked claim of a: %v", err)
	}
	if r, err := l.acquire("b"); err != nil {
		t.Fatalf("another caller was limited by a: %v", err)
	} else {
		r()
	}
	rel[2]()
	rel[2]() // releasing twice gives back one slot only
	r, err := l.acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.acquire("a"); err == nil {
		t.Fatal("a slot released twice was given back twice")
	}
	r()
	rel[0]()
	rel[1]()
	if n := l.callers(); n != 1 {
		t.Fatalf("%d callers hold something; want a, with its parked claim", n)
	}
	p()
	if n := l.callers(); n != 0 {
		t.Fatalf("%d callers kept after every call ended", n)
	}
	if h := l.header(); h != "calls=3, parked=1" {
		t.Fatalf("limits header %q", h)
	}
}
