// Package bytesize prints and reads byte counts in binary units, as the
// engine's messages, the command line and the dashboard show them.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Format prints n in binary units: "512 B", "1.5 KiB", "4.0 GiB".
func Format(n int64) string {
	const unit = 1 << 10
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + string("KMGTPE"[exp]) + "iB"
}

// Parse reads a byte count: a number of bytes, or a number with a binary
// unit (KiB, MiB, GiB, TiB; KB, MB, GB, TB are taken as the same); "off"
// is -1 (no bound).
func Parse(v string) (int64, error) {
	s := strings.TrimSpace(v)
	if s == "off" {
		return -1, nil
	}
	mult := int64(1)
	for i, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		short := u[:1] + "B"
		if t, ok := strings.CutSuffix(s, u); ok {
			s, mult = strings.TrimSpace(t), int64(1)<<(10*(i+1))
			break
		}
		if t, ok := strings.CutSuffix(s, short); ok {
			s, mult = strings.TrimSpace(t), int64(1)<<(10*(i+1))
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("want a size in bytes such as 268435456, 256MiB or 4GiB, or off; got %q", v)
	}
	return n * mult, nil
}
