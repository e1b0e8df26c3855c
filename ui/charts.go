package ui

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/docketdb/docket/engine"
)

// sampleIfDue samples the totals of the queues the caller sees when a
// period has passed since the last sample (the background loop of New
// samples too).
func (rq *request) sampleIfDue() {
	if rq.d.rates.due(rq.api.Clock().Now()) {
		rq.d.sample(rq.ctx(), rq.api)
	}
}

// ratesJSON answers the charts' data: the series of one queue (p, s, q)
// or, without q, the sum of every queue the caller sees. A queue's series
// is served only to a caller who may read the queue.
func (rq *request) ratesJSON() {
	rq.sampleIfDue()
	v := rq.r.URL.Query()
	var keys []qkey
	if v.Get("q") != "" {
		ref, err := refOf(v)
		if err != nil {
			rq.jsonFail(http.StatusBadRequest, err)
			return
		}
		// The read checks the caller's permission on the namespace.
		if _, err := rq.api.Queue(ref.NS, ref.Name).Counts(rq.ctx()); err != nil {
			rq.jsonFail(statusOf(err), err)
			return
		}
		keys = []qkey{{ref.NS, ref.Name}}
	} else {
		qs, err := rq.api.Queues(rq.ctx())
		if err != nil {
			rq.jsonFail(statusOf(err), err)
			return
		}
		for _, q := range qs {
			keys = append(keys, qkey{q.Namespace, q.Name})
		}
	}
	s := rq.d.rates.seriesOf(keys)
	rq.w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rq.w).Encode(s)
}

func (rq *request) jsonFail(status int, err error) {
	rq.w.Header().Set("Content-Type", "application/json")
	rq.w.WriteHeader(status)
	_ = json.NewEncoder(rq.w).Encode(map[string]string{"error": err.Error()})
}

// statusOf is the HTTP status that fits an engine error.
func statusOf(err error) int {
	switch {
	case errors.Is(err, engine.ErrInvalid), errors.Is(err, errBadInput):
		return http.StatusBadRequest
	case errors.Is(err, engine.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, engine.ErrPermission):
		return http.StatusForbidden
	case errors.Is(err, engine.ErrConflict):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}
