package server

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/docketdb/docket/engine"
)

// ErrTokens wraps every problem found in a tokens file.
var ErrTokens = errors.New("docket: tokens file")

// maxTokensLine bounds one line of a tokens file.
const maxTokensLine = 64 << 10

// Tokens maps bearer tokens to callers and callers to grants. It is an
// engine.Authorizer, safe for concurrent use, and can be reloaded while
// calls run: a call sees either the old table or the new one, whole.
type Tokens struct {
	path    string
	table   atomic.Pointer[tokenTable]
	mu      sync.Mutex // serialises Reload
	reloads []func()   // called after each reload, under mu
}

type tokenHash = [sha256.Size]byte

func hashToken(token string) tokenHash { return sha256.Sum256([]byte(token)) }

type tokenTable struct {
	byHash map[tokenHash]string // token hash -> caller id
	grants engine.Policy        // caller id -> grants
}

// LoadTokens reads the tokens file at path.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// ParseTokens reads a tokens table from r (see the package documentation
// for the format). The result cannot be reloaded.
func ParseTokens(r io.Reader) (*Tokens, error) {
	tab, err := parseTokens(r)
	if err != nil {
		return nil, err
	}
	t := &Tokens{}
	t.table.Store(tab)
	return t, nil
}

// Reload re-reads the file LoadTokens was given. On any error the table in
// force stays as it was.
func (t *Tokens) Reload() error {
	if t.path == "" {
		return fmt.Errorf("%w: not loaded from a file", ErrTokens)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTokens, err)
	}
	defer f.Close()
	tab, err := parseTokens(f)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, t.path)
	}
	t.table.Store(tab)
	for _, f := range t.reloads {
		f()
	}
	return nil
}

// onReload has f called after each successful reload, before Reload
// returns (a Server ends the waiting claims of revoked tokens).
func (t *Tokens) onReload(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reloads = append(t.reloads, f)
}

// holds reports whether the table in force maps the token of hash h to
// caller.
func (t *Tokens) holds(h tokenHash, caller string) bool {
	id, ok := t.table.Load().byHash[h]
	return ok && id == caller
}

// Callers returns how many distinct callers the table names.
func (t *Tokens) Callers() int { return len(t.table.Load().grants) }

// Authenticate returns the caller a bearer token stands for.
func (t *Tokens) Authenticate(token string) (engine.Caller, bool) {
	if token == "" || len(token) > 4096 {
		return engine.Caller{}, false
	}
	id, ok := t.table.Load().byHash[hashToken(token)]
	return engine.Caller{ID: id}, ok
}

// Grants implements engine.GrantLister with the grants of the table in
// force, so that DB.Queues answers a caller from its grants.
func (t *Tokens) Grants(c engine.Caller) []engine.Grant {
	return t.table.Load().grants.Grants(c)
}

// Allowed implements engine.Authorizer with the grants of the table in force.
func (t *Tokens) Allowed(c engine.Caller, ns engine.Namespace, want engine.Perm) engine.Perm {
	return t.table.Load().grants.Allowed(c, ns, want)
}

func parseTokens(r io.Reader) (*tokenTable, error) {
	tab := &tokenTable{byHash: map[tokenHash]string{}, grants: engine.Policy{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxTokensLine)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if err := tab.addLine(text); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrTokens, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %w", ErrTokens, line+1, err)
	}
	return tab, nil
}

func (tab *tokenTable) addLine(text string) error {
	fields := strings.Fields(text)
	if len(fields) < 2 {
		return errors.New(`want "sha256:HEX CALLER [PROJECT/SCOPE:PERMS...]"`)
	}
	hexHash, ok := strings.CutPrefix(fields[0], "sha256:")
	if !ok {
		return fmt.Errorf("token hash %.20q must start with sha256:", fields[0])
	}
	var h [sha256.Size]byte
	if n, err := hex.Decode(h[:], []byte(hexHash)); err != nil || n != sha256.Size || len(hexHash) != 2*sha256.Size {
		return fmt.Errorf("token hash must be 64 hex digits")
	}
	id := fields[1]
	if err := validCallerID(id); err != nil {
		return err
	}
	if prev, dup := tab.byHash[h]; dup {
		return fmt.Errorf("token hash listed twice (callers %q and %q)", prev, id)
	}
	tab.byHash[h] = id
	grants := tab.grants[id]
	for _, g := range fields[2:] {
		grant, err := ParseGrant(g)
		if err != nil {
			return err
		}
		grants = append(grants, grant)
	}
	if grants == nil {
		grants = []engine.Grant{} // a caller with no grant is known, and denied everything
	}
	tab.grants[id] = grants
	return nil
}

// validCallerID accepts what the engine accepts as a caller id (As), so
// that a caller the file names is not refused on every call.
func validCallerID(id string) error {
	return engine.Caller{ID: id}.Validate()
}

// ParseGrant parses PROJECT/SCOPE:PERMS, e.g. "acme/*:enqueue+read".
func ParseGrant(s string) (engine.Grant, error) {
	nsPart, permPart, ok := strings.Cut(s, ":")
	project, scope, ok2 := strings.Cut(nsPart, "/")
	if !ok || !ok2 || project == "" || scope == "" || permPart == "" {
		return engine.Grant{}, fmt.Errorf("grant %q: want PROJECT/SCOPE:PERMS", s)
	}
	perms, err := ParsePerms(permPart)
	if err != nil {
		return engine.Grant{}, fmt.Errorf("grant %q: %w", s, err)
	}
	return engine.Grant{Project: project, Scope: scope, Perms: perms}, nil
}

// ParsePerms parses permission names joined by "+" ("all" is every one).
func ParsePerms(s string) (engine.Perm, error) {
	var p engine.Perm
	for _, name := range strings.Split(s, "+") {
		q, ok := permByName[name]
		if !ok {
			return 0, fmt.Errorf("unknown permission %q (want enqueue, work, read, admin, kv-read, kv-write or all)", name)
		}
		p |= q
	}
	return p, nil
}

var permByName = map[string]engine.Perm{
	"enqueue":  engine.PermEnqueue,
	"work":     engine.PermWork,
	"read":     engine.PermRead,
	"admin":    engine.PermAdmin,
	"kv-read":  engine.PermKVRead,
	"kv-write": engine.PermKVWrite,
	"all":      engine.PermAll,
}

// NewToken returns a fresh random bearer token and the line of a tokens
// file that maps it to caller with grants.
func NewToken(caller string, grants ...string) (token, line string, err error) {
	if err := validCallerID(caller); err != nil || caller == "" || strings.ContainsAny(caller, " \t") {
		return "", "", fmt.Errorf("%w: caller id %q: must be non-empty, without spaces, UTF-8, at most %d bytes", ErrTokens, caller, engine.MaxNameBytes)
	}
	for _, g := range grants {
		if _, err := ParseGrant(g); err != nil {
			return "", "", fmt.Errorf("%w: %w", ErrTokens, err)
		}
	}
	var b [32]byte
	rand.Read(b[:])
	token = "dk_" + hex.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(token))
	line = strings.Join(append([]string{"sha256:" + hex.EncodeToString(sum[:]), caller}, grants...), " ")
	return token, line, nil
}
