package ui

import (
	"cmp"
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/bytesize"
)

// nsQuota is what the queue page shows of its namespace's quota: the
// quota (zero: none), what the namespace holds now, and the quota as the
// form edits it.
type nsQuota struct {
	Quota engine.Quota
	Usage engine.NamespaceUsage
	Tasks string // the form's max tasks, "" for no bound
	Bytes string // the form's max bytes, "" for no bound
}

// Set reports whether the namespace has a quota.
func (q nsQuota) Set() bool { return q.Quota != engine.Quota{} }

// quotaOf reads ns's quota from api, when api keeps quotas and the caller
// may read them.
func (rq *request) quotaOf(ns engine.Namespace) (nsQuota, bool) {
	qs, ok := rq.api.(engine.Quotas)
	if !ok {
		return nsQuota{}, false
	}
	q, u, err := qs.Quota(rq.ctx(), ns)
	if err != nil {
		return nsQuota{}, false
	}
	out := nsQuota{Quota: q, Usage: u}
	if q.MaxTasks > 0 {
		out.Tasks = strconv.Itoa(q.MaxTasks)
	}
	if q.MaxBytes > 0 {
		out.Bytes = exactSize(q.MaxBytes)
	}
	return out, true
}

// exactSize writes n in the largest binary unit that holds it whole, so
// that the form posts back the same quota.
func exactSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// parseQuota reads the queue page's quota form: max_tasks, a whole number,
// and max_bytes, a size such as 64MiB; an empty field sets no bound.
func parseQuota(v url.Values) (engine.Quota, error) {
	var q engine.Quota
	if s := strings.TrimSpace(v.Get("max_tasks")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, badInput("tasks at most: %q is not a whole number of 0 or more", s)
		}
		q.MaxTasks = n
	}
	if s := strings.TrimSpace(v.Get("max_bytes")); s != "" {
		n, err := bytesize.Parse(s)
		if err != nil || n < 0 {
			return q, badInput("bytes at most: %q is not a size (say 268435456, 256MiB or 4GiB)", s)
		}
		q.MaxBytes = n
	}
	return q, nil
}

// quotaWords is q in words, "" for no quota.
func quotaWords(q engine.Quota) string {
	var parts []string
	if q.MaxTasks > 0 {
		parts = append(parts, "at most "+group(strconv.Itoa(q.MaxTasks))+" tasks")
	}
	if q.MaxBytes > 0 {
		parts = append(parts, "at most "+bytesize.Format(q.MaxBytes))
	}
	return strings.Join(parts, ", ")
}

// quotaNamespaces bounds how many namespaces quotasOf asks about.
const quotaNamespaces = 100

// quotasOf is the overview's memory table for an API that says nothing of
// the whole state's memory (a caller's view, a client): the namespaces of
// qs the caller may read, with what each holds and its quota, the largest
// first. It is empty when api keeps no quotas.
func quotasOf(ctx context.Context, api engine.API, qs []engine.QueueInfo) memory {
	quotas, ok := api.(engine.Quotas)
	if !ok {
		return memory{}
	}
	var m memory
	var seen []engine.Namespace
	for _, q := range qs {
		if slices.Contains(seen, q.Namespace) || len(seen) == quotaNamespaces {
			continue
		}
		seen = append(seen, q.Namespace)
		quota, u, err := quotas.Quota(ctx, q.Namespace)
		if err != nil {
			continue // not readable by this caller
		}
		u.Namespace = q.Namespace
		m.Top = append(m.Top, memRow{NamespaceUsage: u, Quota: quota})
		m.Quotas = m.Quotas || quota != engine.Quota{}
	}
	slices.SortStableFunc(m.Top, func(a, b memRow) int { return cmp.Compare(b.Bytes, a.Bytes) })
	if len(m.Top) > memTop {
		m.Top = m.Top[:memTop]
	}
	return m
}
