package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/bytesize"
)

var pages = []string{"overview", "queue", "task", "dead", "kv", "workers", "periodic", "cluster", "confirm", "report", "login", "error", "bulk", "bulkreport"}

// templates are the pages' templates, parsed once for every handler (they
// are embedded, and a template executes safely from many goroutines).
var templates = sync.OnceValue(func() map[string]*template.Template {
	base := template.Must(template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	out := make(map[string]*template.Template, len(pages))
	for _, p := range pages {
		out[p] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+p+".html"))
	}
	return out
})

var funcs = template.FuncMap{
	"pretty":  pretty,
	"compact": compact,
	"ago":     ago,
	"dur":     dur,
	"when":    when,
	"trunc":   trunc,
	"cut":     cut,
	"rate":    rate,
	"share":   share,
	"num":     func(n int) string { return group(strconv.Itoa(n)) },
	"num64":   func(n uint64) string { return group(strconv.FormatUint(n, 10)) },
	"bytes":   bytesize.Format,
	"pct":     func(n, of int64) float64 { return 100 * float64(n) / float64(max(of, 1)) },
	"fixed":   func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
	"lagbar":  lagBar,
	"count":   func(c engine.Counts, s engine.State) int { return countOf(c, s) },
	"query":   query,
	"sub":     func(a, b int) int { return a - b },
	"add":     func(a, b int) int { return a + b },
	"deplist": func(prefix string, ref queueRef, nodes []depNode, more int, rel string) depList {
		return depList{Prefix: prefix, Ref: ref, Nodes: nodes, More: more, Rel: rel}
	},
}

func countOf(c engine.Counts, s engine.State) int {
	switch s {
	case engine.Ready:
		return c.Ready
	case engine.Scheduled:
		return c.Scheduled
	case engine.InFlight:
		return c.InFlight
	case engine.Dead:
		return c.Dead
	case engine.Completed:
		return c.Completed
	case engine.Waiting:
		return c.Waiting
	}
	return 0
}

// pretty indents JSON for reading; anything else is shown as it is (the
// template escapes it either way).
func pretty(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Indent(&buf, b, "", "  ") != nil {
		return string(b)
	}
	return buf.String()
}

// compact puts JSON on one line, for a preview; anything else is shown as
// it is.
func compact(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// group writes the digits of a number in groups of three: 1,000,000.
func group(digits string) string {
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// rate shows a rate with two decimals under 10, one under 100, none from
// 100 up.
func rate(f float64) string {
	switch {
	case f >= 100:
		return group(strconv.FormatFloat(f, 'f', 0, 64))
	case f >= 10:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

// share shows a percentage; a negative one means there was nothing to
// divide.
func share(pct float64) string {
	switch {
	case pct < 0:
		return "—"
	case pct == 0:
		return "0%"
	case pct < 0.1:
		return "<0.1%"
	case pct < 10:
		return strconv.FormatFloat(pct, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(pct, 'f', 0, 64) + "%"
}

// lagBar is a member's lag as a percentage of the largest lag, at least a
// sliver when it is behind at all.
func lagBar(lag, top uint64) float64 {
	if lag == 0 || top == 0 {
		return 0
	}
	return max(2, float64(lag)*100/float64(top))
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + dur(-d)
	}
	return dur(d) + " ago"
}

func dur(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.0f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

func trunc(n int, s string) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// cut is trunc without the ellipsis: a prefix that still matches as a
// substring.
func cut(n int, s string) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// query builds a query string from pairs: query "p" x "s" y.
func query(kv ...any) template.URL {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(fmt.Sprint(kv[i]), fmt.Sprint(kv[i+1]))
	}
	return template.URL(v.Encode())
}
