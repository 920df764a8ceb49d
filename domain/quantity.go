package domain

import "math"

// Slots is a number of slots. Quantities in the engine are Slots, never
// bare integers, so a reader can tell a count of slots from a share ratio,
// a priority or an index.
type Slots int64

// Unlimited stands for "no cap" (an absent max, an infinite apportion cap).
const Unlimited Slots = math.MaxInt64

// Limits that keep every product in apportion below 2^62 (decisions.md #5).
const (
	MaxQuantity  Slots = 1 << 40 // any slot quantity, and the pool capacity
	MaxShare           = 1 << 22 // one share, and the sum of one parent's children's shares
	MaxConsumers       = 1 << 20
	// MaxPriority bounds a priority's magnitude from rules version 2 on:
	// the queues order by -priority, which overflows for -2^63.
	MaxPriority = 1 << 40
)

func minSlots(a, b Slots) Slots {
	if a < b {
		return a
	}
	return b
}

func maxSlots(a, b Slots) Slots {
	if a > b {
		return a
	}
	return b
}

// percentOf returns pct% of q, rounded down.
func percentOf(q Slots, pct int64) Slots {
	if q == Unlimited {
		return Unlimited
	}
	return q * Slots(pct) / 100
}
