package events

import (
	"fmt"
	"regexp"
	"time"
)

// leapSecond matches an RFC 3339 time whose seconds are 60 (a leap
// second, which RFC 3339's grammar allows and Go's time.Parse refuses),
// without a fraction or with one of zeros only: the part before the
// seconds and the part after them.
var leapSecond = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:)60((?:\.0+)?(?:Z|[+-]\d{2}:\d{2}))$`)

// ParseTime reads an RFC 3339 time that a person or a program gives the
// ledger: a what-if's at_time and its events' time, --at of explain and
// what-if, the console's as-of ?time=, a scenario file's event time. One
// reading everywhere (docs/decisions.md 520): RFC 3339 with any fraction
// of a second, and a leap second (seconds 60, at any minute, without a
// fraction other than zeros) read as the first instant of the next minute,
// as PostgreSQL reads it, so that allocations_as_of_time and the ledger's
// own as-of answer the same point. Seconds 60 with a fraction (60.5)
// are refused, as PostgreSQL refuses them. The error is the same text at
// every entry point, which prefixes the field or flag.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err == nil {
		return t, nil
	}
	if m := leapSecond.FindStringSubmatch(s); m != nil {
		if t, err := time.Parse(time.RFC3339Nano, m[1]+"59"+m[2]); err == nil {
			return t.Add(time.Second), nil
		}
	}
	return time.Time{}, &TimeError{Text: s}
}

// TimeError is ParseTime's refusal.
type TimeError struct{ Text string }

func (e *TimeError) Error() string {
	return fmt.Sprintf("%.40q is not an RFC 3339 time like 2026-01-02T15:04:05Z (a leap second, :60, is read as the next minute's :00)", e.Text)
}
