package client

import (
	"bytes"
	"io"
	"net/http"
)

// oneWriteMax bounds the request bodies oneWrite copies.
const oneWriteMax = 64 << 10

// oneWrite hands the HTTP/1.1 transport each small request body as a
// bytes.Reader, which it recognises as held in memory and writes in the
// same write as the headers. connect's own body type is not recognised,
// so the headers went first and the body in a second write: a second
// system call and TCP segment per call, and a server that woke up for the
// headers and again for the body. On loopback that was about a tenth of
// the CPU a small call costs.
type oneWrite struct{ next http.RoundTripper }

func (o oneWrite) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 || r.ContentLength > oneWriteMax {
		return o.next.RoundTrip(r)
	}
	b := make([]byte, r.ContentLength)
	_, err := io.ReadFull(r.Body, b)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	r2 := new(http.Request)
	*r2 = *r // the transport may not change r: a shallow copy with its own body
	r2.Body = io.NopCloser(bytes.NewReader(b))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return o.next.RoundTrip(r2)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (o oneWrite) CloseIdleConnections() {
	if c, ok := o.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
