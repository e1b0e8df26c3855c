package ui

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/docketdb/docket/engine"
)

// limitsForm is a queue's limits as the queue page's form shows and sends
// them: each field as typed, "" for none.
type limitsForm struct {
	MaxInFlight, Rate, Per, Burst                 string
	PartMaxInFlight, PartRate, PartPer, PartBurst string
}

// limitFields names the form's fields, their labels (for errors) and where
// they go.
var limitFields = []struct {
	name, label string
	field       func(*limitsForm) *string
}{
	{"max_in_flight", "in flight at most", func(f *limitsForm) *string { return &f.MaxInFlight }},
	{"rate", "rate", func(f *limitsForm) *string { return &f.Rate }},
	{"per", "per", func(f *limitsForm) *string { return &f.Per }},
	{"burst", "burst", func(f *limitsForm) *string { return &f.Burst }},
	{"part_max_in_flight", "in flight at most per partition", func(f *limitsForm) *string { return &f.PartMaxInFlight }},
	{"part_rate", "rate per partition", func(f *limitsForm) *string { return &f.PartRate }},
	{"part_per", "per (partition)", func(f *limitsForm) *string { return &f.PartPer }},
	{"part_burst", "burst per partition", func(f *limitsForm) *string { return &f.PartBurst }},
}

func formOf(l engine.Limits) limitsForm {
	n := func(v int) string {
		if v == 0 {
			return ""
		}
		return strconv.Itoa(v)
	}
	d := func(v time.Duration) string {
		if v == 0 {
			return ""
		}
		return v.String()
	}
	// The engine reports the burst in effect; one equal to the rate is the
	// default, left empty so that a new rate brings its own.
	burst := func(b, rate int) string {
		if b == rate {
			return ""
		}
		return n(b)
	}
	return limitsForm{MaxInFlight: n(l.MaxInFlight), Rate: n(l.Rate), Per: d(l.Per), Burst: burst(l.Burst, l.Rate),
		PartMaxInFlight: n(l.PartitionMaxInFlight), PartRate: n(l.PartitionRate), PartPer: d(l.PartitionPer), PartBurst: burst(l.PartitionBurst, l.PartitionRate)}
}

// parseLimits reads the limits form. Every field is optional (empty is
// none); a rate needs its period, a period or a burst needs its rate. The
// errors name the field as the form labels it; the engine checks the
// bounds again.
func parseLimits(v url.Values) (engine.Limits, error) {
	var f limitsForm
	for _, fl := range limitFields {
		*fl.field(&f) = strings.TrimSpace(v.Get(fl.name))
	}
	var err error
	num := func(label, s string, hi int) int {
		if err != nil || s == "" {
			return 0
		}
		n, e := strconv.Atoi(s)
		switch {
		case e != nil:
			err = badInput("%s: %q is not a whole number", label, s)
		case n < 0 || n > hi:
			err = badInput("%s: %d is outside 0..%d", label, n, hi)
		}
		return n
	}
	per := func(label, s string) time.Duration {
		if err != nil || s == "" {
			return 0
		}
		d, e := time.ParseDuration(s)
		switch {
		case e != nil:
			err = badInput("%s: %q is not a duration (say 1s, 500ms or 1m)", label, s)
		case d < time.Microsecond || d > engine.MaxRatePer:
			err = badInput("%s: %v is outside 1µs..%v", label, d, engine.MaxRatePer)
		}
		return d
	}
	l := engine.Limits{
		MaxInFlight:          num("in flight at most", f.MaxInFlight, engine.MaxInFlightLimit),
		Rate:                 num("rate", f.Rate, engine.MaxRateTokens),
		Per:                  per("per", f.Per),
		Burst:                num("burst", f.Burst, engine.MaxRateTokens),
		PartitionMaxInFlight: num("in flight at most per partition", f.PartMaxInFlight, engine.MaxInFlightLimit),
		PartitionRate:        num("rate per partition", f.PartRate, engine.MaxRateTokens),
		PartitionPer:         per("per (partition)", f.PartPer),
		PartitionBurst:       num("burst per partition", f.PartBurst, engine.MaxRateTokens),
	}
	if err != nil {
		return engine.Limits{}, err
	}
	pair := func(what string, rate int, per time.Duration, burst int) error {
		switch {
		case rate > 0 && per == 0:
			return badInput("a %srate of %d needs a period: per 1s, per 1m…", what, rate)
		case rate == 0 && (per != 0 || burst != 0):
			return badInput("a %speriod or burst needs a rate", what)
		}
		return nil
	}
	if err := pair("", l.Rate, l.Per, l.Burst); err != nil {
		return engine.Limits{}, err
	}
	if err := pair("partition ", l.PartitionRate, l.PartitionPer, l.PartitionBurst); err != nil {
		return engine.Limits{}, err
	}
	return l, nil
}
