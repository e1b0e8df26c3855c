// Package record is a recording decorator of engine.API for the tests of
// this repository: every call of a method of engine.API, of the Queue and
// KV handles it returns, and of engine.Presence and engine.Quotas (when
// the wrapped value implements them) is counted under its name
// ("Queue.Enqueue", "KV.Commit", "Presence.Workers") and passed through.
// The tests that check that each layer of docket (server and client, the
// fuzz model, the command line, the dashboard) reaches every method use it
// with Check.
//
// The methods are generated from engine's interface declarations
// (record_gen.go, by `go generate ./internal/enginetest/`).
package record

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/docketdb/docket/engine"
)

// Recorder counts the calls made through the values Wrap returns.
type Recorder struct {
	mu    sync.Mutex
	calls map[string]int
}

// New returns a Recorder that has counted nothing.
func New() *Recorder { return &Recorder{calls: map[string]int{}} }

func (r *Recorder) hit(name string) {
	r.mu.Lock()
	r.calls[name]++
	r.mu.Unlock()
}

// Count returns how many times the method name ("Queue.Claim") was called.
func (r *Recorder) Count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[name]
}

// Calls returns a copy of the counts, by method name.
func (r *Recorder) Calls() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]int, len(r.calls))
	for k, v := range r.calls {
		m[k] = v
	}
	return m
}

// Reset forgets every call counted.
func (r *Recorder) Reset() {
	r.mu.Lock()
	clear(r.calls)
	r.mu.Unlock()
}

// Wrap returns api recording its calls in r. The value returned implements
// engine.Presence and engine.Quotas when api does, and nothing else of api
// (a DB's Stats, As, ...): a layer that needs those is given them apart.
func (r *Recorder) Wrap(next engine.API) engine.API {
	a := api{r, next}
	p, isP := next.(engine.Presence)
	q, isQ := next.(engine.Quotas)
	switch {
	case isP && isQ:
		return struct {
			api
			presence
			quotas
		}{a, presence{r, p}, quotas{r, q}}
	case isP:
		return struct {
			api
			presence
		}{a, presence{r, p}}
	case isQ:
		return struct {
			api
			quotas
		}{a, quotas{r, q}}
	}
	return a
}

// Interfaces are the interfaces whose methods are recorded, by the name
// that prefixes their methods' names.
var Interfaces = map[string]reflect.Type{
	"API":      reflect.TypeFor[engine.API](),
	"Queue":    reflect.TypeFor[engine.Queue](),
	"KV":       reflect.TypeFor[engine.KV](),
	"Presence": reflect.TypeFor[engine.Presence](),
	"Quotas":   reflect.TypeFor[engine.Quotas](),
}

// Methods lists every method of Interfaces, found by reflection, as
// "Interface.Method", sorted.
func Methods() []string {
	var ms []string
	for name, t := range Interfaces {
		for i := range t.NumMethod() {
			ms = append(ms, name+"."+t.Method(i).Name)
		}
	}
	sort.Strings(ms)
	return ms
}

// Missing compares what r counted with every method of Methods, for the
// layer named layer, whose exemptions (method name → the reason the layer
// does not offer it) are exempt. It returns one line per method neither
// reached nor exempt, per exemption of a method that does not exist, and
// per exemption of a method that was reached all the same.
func (r *Recorder) Missing(layer string, exempt map[string]string) []string {
	calls := r.Calls()
	all := map[string]bool{}
	var out []string
	for _, m := range Methods() {
		all[m] = true
		_, ex := exempt[m]
		switch {
		case calls[m] == 0 && !ex:
			out = append(out, fmt.Sprintf("%s: %s is not reached through this layer (reach it, or exempt it with a reason)", layer, m))
		case calls[m] > 0 && ex:
			out = append(out, fmt.Sprintf("%s: %s is exempt (%q) but was reached: remove the exemption", layer, m, exempt[m]))
		}
	}
	for m, why := range exempt {
		if !all[m] {
			out = append(out, fmt.Sprintf("%s: exemption of %s (%q) names no method of %s", layer, m, why, strings.Join(interfaceNames(), ", ")))
		} else if strings.TrimSpace(why) == "" {
			out = append(out, fmt.Sprintf("%s: exemption of %s gives no reason", layer, m))
		}
	}
	sort.Strings(out)
	return out
}

func interfaceNames() []string {
	var ns []string
	for n := range Interfaces {
		ns = append(ns, "engine."+n)
	}
	sort.Strings(ns)
	return ns
}

// Check fails t with every line of Missing.
func (r *Recorder) Check(t testing.TB, layer string, exempt map[string]string) {
	t.Helper()
	for _, line := range r.Missing(layer, exempt) {
		t.Error(line)
	}
}
