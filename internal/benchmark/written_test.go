package benchmark

import (
	"testing"
	"time"
)

// TestWrittenSaysWhatTheTimesAre: the progress line of a written log
// says which figure is publishing and which generating, and names
// signing only in a signed run: it read "written in 12ms (generation,
// the engine's own fold of every event, and signing: 400ms)" in a
// --unsigned run, the larger figure in brackets and signing named.
func TestWrittenSaysWhatTheTimesAre(t *testing.T) {
	st := logStats{events: 200, gen: 400 * time.Millisecond, publish: 12 * time.Millisecond}
	for _, tc := range []struct {
		signed, fold bool
		want         string
	}{
		{false, true, "published in 12ms; generating the events took 400ms (the engine's own fold of every event included)"},
		{true, true, "published in 12ms; generating the events took 400ms (the engine's own fold of every event and signing included)"},
		{true, false, "published in 12ms; generating the events took 400ms (signing included)"},
		{false, false, "published in 12ms; generating the events took 400ms"},
	} {
		if got := st.written(tc.signed, tc.fold); got != tc.want {
			t.Errorf("signed %t, fold %t: %q, want %q", tc.signed, tc.fold, got, tc.want)
		}
	}
}
