package ui

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Session defaults (see Options).
const (
	DefaultSessionIdle     = 2 * time.Hour
	DefaultSessionLifetime = 12 * time.Hour
	DefaultMaxSessions     = 10_000
)

// session is one sign-in: the token it was made with, checked again on
// every request so that a token revoked since ends the session.
type session struct {
	id            string
	token         string
	created, used time.Time
}

// sessions are the dashboard's sign-ins, kept in memory: the browser holds
// only a random id. A session ends at sign-out, after idle without a
// request, lifetime after sign-in, or when max newer ones push it out
// (the least recently used goes first).
type sessions struct {
	idle, lifetime time.Duration
	max            int

	mu   sync.Mutex
	byID map[string]*list.Element // of *session
	lru  *list.List               // front: most recently used
}

func newSessions(idle, lifetime time.Duration, max int) *sessions {
	return &sessions{idle: idle, lifetime: lifetime, max: max, byID: map[string]*list.Element{}, lru: list.New()}
}

// start begins a session for token and returns its id.
func (s *sessions) start(token string, now time.Time) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	id := hex.EncodeToString(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.lru.Len() >= s.max {
		s.drop(s.lru.Back())
	}
	s.byID[id] = s.lru.PushFront(&session{id: id, token: token, created: now, used: now})
	return id
}

// token returns the token of session id if it is still alive, and marks
// it used.
func (s *sessions) token(id string, now time.Time) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return "", false
	}
	ss := e.Value.(*session)
	if now.Sub(ss.used) >= s.idle || now.Sub(ss.created) >= s.lifetime {
		s.drop(e)
		return "", false
	}
	ss.used = now
	s.lru.MoveToFront(e)
	return ss.token, true
}

// end ends session id; ending one that does not exist does nothing.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		s.drop(e)
	}
}

// len is how many sessions are kept.
func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

func (s *sessions) drop(e *list.Element) {
	delete(s.byID, e.Value.(*session).id)
	s.lru.Remove(e)
}

// localTarget returns next if it is a page of this dashboard to return to
// after signing in, else the dashboard's home: a sign-in link must not send
// the browser to another site ("//evil.example", "/\evil.example",
// "https://evil.example") or anywhere outside the dashboard.
func localTarget(prefix, next string) string {
	if next == "" || !strings.HasPrefix(next, prefix) || strings.HasPrefix(next, "//") ||
		strings.ContainsAny(next, `\`) || strings.Contains(next, "..") ||
		strings.IndexFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return prefix
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, prefix) {
		return prefix
	}
	switch strings.TrimPrefix(u.Path, prefix) {
	case "login", "logout":
		return prefix
	}
	return next
}
