package projections

import (
	"sync"
	"time"
)

// Failures records, per projector (a Group's partitions each), since when
// its retries have failed without a success in between: a projector that
// cannot fetch or write (a permission NATS refuses, a role PostgreSQL
// refuses, an outage) retries for ever and logs it, and its liveness
// probe says so once the streak is long (projector --stuck-after). It
// never holds error text: the probes need no token.
type Failures struct {
	mu    sync.Mutex
	since map[string]time.Time
	now   func() time.Time
}

// NewFailures returns an empty record.
func NewFailures() *Failures { return &Failures{since: map[string]time.Time{}, now: time.Now} }

// WithFailures makes the projector record its failing retries in f.
func WithFailures(f *Failures) Option { return func(c *config) { c.failures = f } }

// StuckAfter is how long a projector may fail without a success before
// its liveness says stuck (the default of projector --stuck-after):
// longer than the outages the retries ride out unnoticed (a PostgreSQL
// restart, a NATS leader election).
const StuckAfter = time.Minute

// failed notes a failure of name's retries (the first of a streak sets
// its start).
func (f *Failures) failed(name string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.since[name]; !ok {
		f.since[name] = f.now()
	}
}

// succeeded ends name's streak.
func (f *Failures) succeeded(name string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.since, name)
}

// Longest is how long the longest current streak has lasted (0: none).
func (f *Failures) Longest() time.Duration {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var longest time.Duration
	for _, at := range f.since { // a maximum: the order does not matter
		longest = max(longest, f.now().Sub(at))
	}
	return longest
}
