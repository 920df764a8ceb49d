package events

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what one event may hold. The ledger refuses an event past
// any of them before it reaches the engine, so no stored event can make
// folding or projecting a pool slow or large (a 100,000-level path, a
// plan of a million consumers). Together they keep the largest plan
// well under NATS's default 1 MB message: a plan at every limit at once
// is about 0.9 MB (README, "Limits").
const (
	// MaxPathLen bounds a consumer path, in bytes.
	MaxPathLen = 256
	// MaxPathDepth bounds the segments of a consumer path (/a/b is 2).
	MaxPathDepth = 16
	// MaxPlanConsumers bounds the consumers of a plan, counting the
	// parents its paths imply; also the entries of one demand event.
	MaxPlanConsumers = 2048
	// MaxHostsPerPool bounds the hosts a pool has ever had (up or down).
	MaxHostsPerPool = 4096
	// MaxHostNameLen bounds a host name, in bytes (a DNS name's length).
	MaxHostNameLen = 253
	// MaxGroupLen bounds a host's group name, in bytes.
	MaxGroupLen = 253
)

// Refusals of the limits; match them with errors.Is.
var (
	ErrPathTooLong      = NewRefusal("path_too_long", "consumer path too long")
	ErrPathTooDeep      = NewRefusal("path_too_deep", "consumer path too deep")
	ErrTooManyConsumers = NewRefusal("too_many_consumers", "too many consumers")
	ErrTooManyHosts     = NewRefusal("too_many_hosts", "too many hosts in the pool")
	ErrInvalidHostName  = NewRefusal("invalid_host_name", "invalid host name")
)

// CheckLimits refuses a payload past a limit of this file, cheapest
// checks first. It does not validate paths fully (the engine does); it
// only bounds what the engine will be given. MaxHostsPerPool needs the
// pool's state and is checked by the caller.
func CheckLimits(p Payload) error {
	switch e := p.(type) {
	case *Demand:
		if len(e.Demands) > MaxPlanConsumers {
			return fmt.Errorf("%w: demand names %d consumers (at most %d)", ErrTooManyConsumers, len(e.Demands), MaxPlanConsumers)
		}
		for path := range e.Demands {
			if err := checkPathSize(path); err != nil {
				return err
			}
		}
	case *Release:
		return checkPathSize(e.Consumer)
	case *PlanChange:
		return checkPlanLimits(e.Plan)
	case *HostUp:
		if err := ValidateHostName(e.Host); err != nil {
			return err
		}
		return ValidateGroupName(e.Group)
	case *HostDown:
		return ValidateHostName(e.Host)
	}
	return nil
}

func checkPlanLimits(pl Plan) error {
	if len(pl.Consumers) > MaxPlanConsumers {
		return fmt.Errorf("%w: %d consumers (at most %d)", ErrTooManyConsumers, len(pl.Consumers), MaxPlanConsumers)
	}
	for _, c := range pl.Consumers {
		if err := checkPathSize(c.Path); err != nil {
			return err
		}
	}
	// Parents implied by the paths count too: they are nodes of the tree
	// the engine builds and rows the projector writes. Bounded above by
	// MaxPlanConsumers*MaxPathDepth entries, checked as it grows.
	nodes := make(map[string]struct{}, len(pl.Consumers))
	for _, c := range pl.Consumers {
		for p := c.Path; len(p) > 1; {
			if _, seen := nodes[p]; seen {
				break
			}
			nodes[p] = struct{}{}
			if len(nodes) > MaxPlanConsumers {
				return fmt.Errorf("%w: the plan's paths name more than %d consumers with their parents", ErrTooManyConsumers, MaxPlanConsumers)
			}
			i := strings.LastIndexByte(p, '/')
			if i <= 0 {
				break
			}
			p = p[:i]
		}
	}
	return nil
}

// checkPathSize bounds a path's length and depth (its form is the
// engine's to check).
func checkPathSize(p string) error {
	if len(p) > MaxPathLen {
		return fmt.Errorf("%w: %d bytes, %.32q... (at most %d)", ErrPathTooLong, len(p), p, MaxPathLen)
	}
	if d := strings.Count(p, "/"); d > MaxPathDepth {
		return fmt.Errorf("%w: %q has %d levels (at most %d)", ErrPathTooDeep, p, d, MaxPathDepth)
	}
	return nil
}

// ValidateGroupName accepts a resource group name (a host_up event's
// group, an own entry's group): at most MaxGroupLen bytes of UTF-8 text
// without control characters. The empty group means "default".
func ValidateGroupName(g string) error {
	if len(g) > MaxGroupLen || !utf8.ValidString(g) || strings.IndexFunc(g, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: group %.64q: at most %d bytes of UTF-8 text without control characters", ErrInvalidHostName, g, MaxGroupLen)
	}
	return nil
}

// ValidateHostName accepts what a consumer path segment accepts (not
// empty, not "." or "..", no white space or control character, valid
// UTF-8), without "/", and without NATS's wildcards "*" and ">", at most
// MaxHostNameLen bytes.
func ValidateHostName(h string) error {
	switch {
	case h == "":
		return fmt.Errorf("%w: empty", ErrInvalidHostName)
	case len(h) > MaxHostNameLen:
		return fmt.Errorf("%w: %d bytes, %.32q... (at most %d)", ErrInvalidHostName, len(h), h, MaxHostNameLen)
	case h == "." || h == "..":
		return fmt.Errorf("%w: %q", ErrInvalidHostName, h)
	case !utf8.ValidString(h):
		return fmt.Errorf("%w: %q is not UTF-8", ErrInvalidHostName, h)
	}
	if i := strings.IndexFunc(h, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == '/' || r == '*' || r == '>'
	}); i >= 0 {
		return fmt.Errorf("%w: %q contains %q (no white space, control characters, '/', '*' or '>')", ErrInvalidHostName, h, []rune(h[i:])[0])
	}
	return nil
}
