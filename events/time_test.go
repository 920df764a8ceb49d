package events

import (
	"errors"
	"testing"
	"time"
)

// TestParseTimeLeapSecond: a leap second (seconds 60) is the next
// minute's first instant, as PostgreSQL reads it (decision 520); with a
// fraction other than zeros, or out of range otherwise, it is refused
// with the one message.
func TestParseTimeLeapSecond(t *testing.T) {
	for in, want := range map[string]time.Time{
		"2016-12-31T23:59:60Z":           time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC),
		"2016-12-31T23:59:60.000Z":       time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC),
		"2026-05-05T12:34:60+02:00":      time.Date(2026, 5, 5, 10, 35, 0, 0, time.UTC),
		"2026-11-21T12:00:00.123456789Z": time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC),
		"2026-11-21T12:00:00-05:30":      time.Date(2026, 11, 21, 17, 30, 0, 0, time.UTC),
		"2016-12-31T23:59:59.999999999Z": time.Date(2016, 12, 31, 23, 59, 59, 999999999, time.UTC),
	} {
		got, err := ParseTime(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"2016-12-31T23:59:60.5Z", "2016-12-31T23:59:61Z", "2016-12-31T23:60:00Z", "2016-12-31T23:59:60", "2016-12-31 23:59:60Z", "yesterday", ""} {
		_, err := ParseTime(in)
		var te *TimeError
		if !errors.As(err, &te) {
			t.Errorf("ParseTime(%q): %v; want a TimeError", in, err)
		}
	}
}
