package pgcluster

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error returned by this package is an [*Error]
// that matches one of them with errors.Is.
var (
	// ErrBinariesNotFound: no directory holding initdb, pg_ctl and
	// postgres was found.
	ErrBinariesNotFound = errors.New("PostgreSQL binaries not found")
	// ErrNoDataDir: Start was called without WithDataDir.
	ErrNoDataDir = errors.New("no data directory given (use WithDataDir)")
	// ErrPrepare: the data or socket directory could not be created or
	// given to the unprivileged user.
	ErrPrepare = errors.New("cannot prepare directories")
	// ErrInitdb: initdb failed; the Error carries its output.
	ErrInitdb = errors.New("initdb failed")
	// ErrStart: pg_ctl start failed or the server did not accept
	// connections; the Error carries pg_ctl's output and the log tail.
	ErrStart = errors.New("server did not start")
	// ErrCreateDatabase: the server runs but the database could not be
	// created.
	ErrCreateDatabase = errors.New("cannot create database")
	// ErrStop: pg_ctl stop failed.
	ErrStop = errors.New("server did not stop")
)

// Error describes a failure of one step. Kind is one of the sentinel
// errors above; Err, when set, is the underlying cause; Output is what the
// failing program printed (and, for ErrStart, the tail of the server log).
type Error struct {
	Kind   error
	Detail string
	Output string
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("pgcluster: ")
	b.WriteString(e.Kind.Error())
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if out := strings.TrimSpace(e.Output); out != "" {
		b.WriteString("\n--- output ---\n")
		b.WriteString(out)
	}
	return b.String()
}

// Unwrap lets errors.Is match both the kind and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

func newErr(kind error, err error, format string, args ...any) *Error {
	return &Error{Kind: kind, Err: err, Detail: fmt.Sprintf(format, args...)}
}
