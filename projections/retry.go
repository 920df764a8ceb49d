package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// fatalError is an error retrying cannot fix: Run stops with it.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func fatal(err error) error {
	if err == nil || isFatal(err) {
		return err
	}
	return &fatalError{err}
}

func fatalf(format string, args ...any) error { return fatal(fmt.Errorf(format, args...)) }

func isFatal(err error) bool {
	var f *fatalError
	return errors.As(err, &f)
}

// classify marks the PostgreSQL errors that a retry would only repeat:
// data exceptions (22), integrity violations (23) and missing or wrong
// schema (42). Connection loss, shutdowns and timeouts stay retryable.
func classify(err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && len(pg.Code) == 5 {
		switch pg.Code[:2] {
		case "22", "23", "42":
			return fatal(err)
		}
	}
	return err
}

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// retry runs f until it succeeds, fails fatally or ctx ends, waiting a
// doubling delay (up to maxBackoff) between attempts and logging each
// failure, so an outage of NATS or PostgreSQL is survived and visible.
func (p *Projector) retry(ctx context.Context, what string, f func() error) error {
	delay := minBackoff
	for {
		err := f()
		if err == nil {
			p.cfg.failures.succeeded(p.offsetName())
			return nil
		}
		if isFatal(err) || errors.Is(err, ErrPartitionLost) || errors.Is(err, errOffsetBehind) || errors.Is(err, errOffsetMoved) {
			return err
		}
		p.cfg.failures.failed(p.offsetName())
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.cfg.log.Warn("projector: "+what+" failed; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, maxBackoff)
	}
}
