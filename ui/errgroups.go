package ui

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/docketdb/docket/engine"
)

// Error messages are grouped by their shape, not their text: the ids,
// numbers, addresses, times and quoted values a message carries change from
// task to task, and would make each failure a group of its own.
var (
	reTime   = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?`)
	reUUID   = regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`)
	reHex0x  = regexp.MustCompile(`\b0[xX][0-9a-fA-F]+\b`)
	reHexRun = regexp.MustCompile(`\b[0-9a-fA-F]{8,}\b`)
	reQuoted = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|`[^`]*`|(^|[^\\w])'[^'\\n]*'")
	reNumber = regexp.MustCompile(`\b\d+(?:\.\d+)*`)
	reSpace  = regexp.MustCompile(`\s+`)
)

// maxErrKey bounds the length of a group's key, in runes.
const maxErrKey = 300

// errKey is the group of an error message: its first line, with quoted
// values, times, UUIDs, hexadecimal ids and numbers replaced by
// placeholders, spaces collapsed. errKey(errKey(m)) == errKey(m), so a key
// sent back by a form finds its group again.
func errKey(msg string) string {
	line, _, _ := strings.Cut(msg, "\n")
	line = reQuoted.ReplaceAllStringFunc(line, func(s string) string {
		if q := strings.IndexByte(s, '\''); q > 0 && s[0] != '"' && s[0] != '`' {
			return s[:q] + `"…"` // the character before the quote stays
		}
		return `"…"`
	})
	line = reTime.ReplaceAllString(line, "<time>")
	line = reUUID.ReplaceAllString(line, "<uuid>")
	line = reHex0x.ReplaceAllString(line, "<hex>")
	line = reHexRun.ReplaceAllStringFunc(line, func(s string) string {
		if strings.ContainsAny(s, "0123456789") {
			return "<hex>"
		}
		return s // a word of the letters a to f
	})
	line = reNumber.ReplaceAllString(line, "<n>")
	line = strings.TrimSpace(reSpace.ReplaceAllString(line, " "))
	if r := []rune(line); len(r) > maxErrKey {
		line = string(r[:maxErrKey]) + "…"
	}
	return line
}

// errorGroup is the dead tasks of a queue whose last errors have one shape.
type errorGroup struct {
	Key      string // the shape, errKey of each message
	Sample   string // the most recent message of the group, as it was
	Count    int
	Distinct int      // distinct messages, up to maxDistinct
	IDs      []uint64 // the first few, as links
	Kinds    []string
	Last     time.Time
	seen     map[string]bool
}

const (
	groupIDs    = 8
	maxDistinct = 100
	// groupsPage is how many groups a page of the dead letters shows.
	groupsPage = 20
)

// groupErrors groups tasks by errKey of their last error, the largest
// groups first.
func groupErrors(ts []engine.TaskInfo) []*errorGroup {
	byKey := map[string]*errorGroup{}
	var groups []*errorGroup
	for _, t := range ts {
		k := errKey(t.LastError)
		g := byKey[k]
		if g == nil {
			g = &errorGroup{Key: k, seen: map[string]bool{}}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.Count++
		if !t.UpdatedAt.Before(g.Last) {
			g.Last, g.Sample = t.UpdatedAt, t.LastError
		}
		if len(g.seen) < maxDistinct && !g.seen[t.LastError] {
			g.seen[t.LastError] = true
		}
		g.Distinct = len(g.seen)
		if len(g.IDs) < groupIDs {
			g.IDs = append(g.IDs, t.ID)
		}
		if t.Kind != "" && !slices.Contains(g.Kinds, t.Kind) && len(g.Kinds) < 5 {
			g.Kinds = append(g.Kinds, t.Kind)
		}
	}
	slices.SortStableFunc(groups, func(a, b *errorGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Key, b.Key))
	})
	return groups
}
