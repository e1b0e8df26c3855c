package worker

import (
	"context"
	"log/slog"
)

// minLevel passes on records at or above min and drops the rest, so that
// the default logger is silent except for warnings.
type minLevel struct {
	min slog.Level
	h   slog.Handler
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}

func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{min: m.min, h: m.h.WithAttrs(as)}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{min: m.min, h: m.h.WithGroup(name)}
}

// Attribute keys of the runtime's log lines.
const (
	logTask    = "task_id"
	logQueue   = "queue"
	logNS      = "namespace"
	logAttempt = "attempt"
	logOwner   = "owner"
)
