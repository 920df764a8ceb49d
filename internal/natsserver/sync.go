package natsserver

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrBadSync: a sync policy that is neither "always" nor
// "interval:DURATION" with a positive duration.
var ErrBadSync = errors.New("natsserver: bad sync policy")

// Sync is when JetStream's file store flushes what it wrote to disk
// (fsync). It is the server-wide setting (sync_interval in a nats-server
// configuration), so it applies to every stream of the server.
type Sync struct {
	// Always syncs every write before the publish is acknowledged: an
	// acknowledged event survives a power loss or kernel crash.
	Always bool
	// Interval, when Always is false, syncs in the background this often:
	// a crash of the machine (not of the process alone) may lose the
	// writes of up to the last Interval, although they were acknowledged.
	Interval time.Duration
}

// SyncAlways is the default: sync every acknowledged write. One node has
// no other copy of the log, so anything less may lose acknowledged events
// (see the README's production notes).
var SyncAlways = Sync{Always: true}

// ParseSync reads a policy as the --nats-sync flag spells it: "always", or
// "interval:DURATION" (e.g. "interval:2m", nats-server's default).
func ParseSync(s string) (Sync, error) {
	if s == "always" {
		return SyncAlways, nil
	}
	v, ok := strings.CutPrefix(s, "interval:")
	if !ok {
		return Sync{}, fmt.Errorf("%w %q: want always or interval:DURATION (e.g. interval:2m)", ErrBadSync, s)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return Sync{}, fmt.Errorf("%w %q: the interval must be a positive duration such as 2m or 500ms", ErrBadSync, s)
	}
	return Sync{Interval: d}, nil
}

// String spells the policy as ParseSync reads it.
func (s Sync) String() string {
	if s.Always {
		return "always"
	}
	return "interval:" + s.Interval.String()
}

// Set and Type make *Sync a command-line flag value (pflag.Value).
func (s *Sync) Set(v string) error {
	p, err := ParseSync(v)
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// Type names the flag's value in --help.
func (s *Sync) Type() string { return "always|interval:DURATION" }

// WithSync sets the file store's sync policy (default SyncAlways).
func WithSync(s Sync) Option { return func(c *config) { c.sync = s } }
