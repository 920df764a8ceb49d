package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Reclaim policies (docs/rules.md#priority, #share-ratio).
const (
	ReclaimPriority   = "priority"
	ReclaimShareRatio = "share_ratio"
)

// Enforcement levels of share ratios (docs/rules.md#shares).
const (
	EnforcementLeaf   = "leaf"
	EnforcementParent = "parent"
)

// Plan is a pool's policy and consumer tree. Parents may be listed or
// implied by their children's paths.
type Plan struct {
	// Rules is the rules version the pool runs under from this plan on
	// (docs/rules.md#versions). 0 means "not named": the ledger
	// stamps the newest version at append, and a stored plan without it
	// was written before versions existed and means version 1.
	Rules     int          `json:"rules,omitempty"`
	Policy    Policy       `json:"policy"`
	Consumers ConsumerList `json:"consumers"`
}

// ConsumerList is a plan's consumers. It decodes one consumer at a time
// and stops as soon as the list has more than MaxPlanConsumers, so a
// request never holds more consumers than a plan may have, whatever the
// size of its body.
type ConsumerList []Consumer

// UnmarshalJSON decodes the list strictly (unknown fields refused), one
// element at a time.
func (l *ConsumerList) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil { // null
		*l = nil
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("consumers must be an array")
	}
	var out ConsumerList
	pinned := -1 // the first consumer naming preemptable
	for dec.More() {
		if len(out) == MaxPlanConsumers {
			if pinned >= 0 {
				// Builds before rules 4 did not know the field: they
				// refused the list as malformed at that consumer, before
				// its length. A stored log keeps that refusal (its chain).
				return fmt.Errorf("consumers[%d]: preemptable, a field rules 1 to 3 do not know, in a list of more than %d consumers", pinned, MaxPlanConsumers)
			}
			return fmt.Errorf("%w: more than %d consumers", ErrTooManyConsumers, MaxPlanConsumers)
		}
		var c Consumer
		if err := dec.Decode(&c); err != nil {
			return err
		}
		if c.Preemptable != nil && pinned < 0 {
			pinned = len(out)
		}
		out = append(out, c)
	}
	if _, err := dec.Token(); err != nil { // the closing ]
		return err
	}
	*l = out
	return nil
}

// Policy selects the sharing rules. Empty fields take their defaults:
// reclaim "priority", enforcement "leaf", preemption true, balance true.
type Policy struct {
	Reclaim     string `json:"reclaim,omitempty"`
	Enforcement string `json:"enforcement,omitempty"`
	Preemption  *bool  `json:"preemption,omitempty"`
	// Balance (share_ratio only): false is YARN's default preemption,
	// where reclaim restores planned shares but never lifts a consumer
	// above its own (docs/rules.md#balance-false).
	Balance *bool `json:"balance,omitempty"`
	// ReclaimForPreference (ownership): an owner takes back its most
	// preferred owned slots from a borrower even while idle slots exist
	// in less preferred ownership or the share pools (default false,
	// docs/rules.md#ownership-placement).
	ReclaimForPreference *bool `json:"reclaim_for_preference,omitempty"`
	// PriorityBands (rules 4, share_ratio only): the surplus above the
	// guarantees goes to the higher priorities among siblings first
	// (yarn.go).
	PriorityBands *bool `json:"priority_bands,omitempty"`
}

// ReclaimOrDefault returns the reclaim policy, "priority" when unset.
func (p Policy) ReclaimOrDefault() string {
	if p.Reclaim == "" {
		return ReclaimPriority
	}
	return p.Reclaim
}

// EnforcementOrDefault returns the enforcement level, "leaf" when unset.
func (p Policy) EnforcementOrDefault() string {
	if p.Enforcement == "" {
		return EnforcementLeaf
	}
	return p.Enforcement
}

// PreemptionOrDefault reports whether reclaim is allowed (default true).
func (p Policy) PreemptionOrDefault() bool {
	return p.Preemption == nil || *p.Preemption
}

// BalanceOrDefault reports whether share_ratio reclaim balances beyond
// planned shares (default true).
func (p Policy) BalanceOrDefault() bool {
	return p.Balance == nil || *p.Balance
}

// ReclaimForPreferenceOrDefault reports whether owners reclaim preferred
// owned slots while idle slots exist elsewhere (default false).
func (p Policy) ReclaimForPreferenceOrDefault() bool {
	return p.ReclaimForPreference != nil && *p.ReclaimForPreference
}

// Consumer is one node of the consumer tree, named by its path. Share may
// be 0 (a zero share) only under rules 4 with reclaim share_ratio.
type Consumer struct {
	Path         string    `json:"path"`
	Share        *int64    `json:"share,omitempty"`
	Priority     int64     `json:"priority,omitempty"`
	Max          *Max      `json:"max,omitempty"`
	BorrowLimit  *int64    `json:"borrow_limit,omitempty"`
	ReclaimGrace *Duration `json:"reclaim_grace,omitempty"`
	LendGrace    *Duration `json:"lend_grace,omitempty"`
	// Own lists what the consumer owns (docs/rules.md#ownership);
	// nil when it owns nothing.
	Own []OwnEntry `json:"own,omitempty"`
	// Lend tells whether unused owned slots may be lent out (default true).
	Lend *bool `json:"lend,omitempty"`
	// Preemptable (rules 4): false pins the slots of the consumer's leaves
	// (never reclaimed); default the parent's value, true at the top
	// (yarn.go).
	Preemptable *bool `json:"preemptable,omitempty"`
}

// ShareOrDefault returns the share ratio, 1 when unset.
func (c Consumer) ShareOrDefault() int64 {
	if c.Share == nil {
		return 1
	}
	return *c.Share
}

// Max caps a consumer subtree's allocation: a number of slots, or a
// percentage of the parent's planned share (rounded down). It is written
// as a JSON number (slots) or a string "40%".
type Max struct {
	Slots   int64
	Percent int64
	// IsPercent tells which of the two fields is meant.
	IsPercent bool
}

// MarshalJSON writes slots as a number and percentages as "N%".
func (m Max) MarshalJSON() ([]byte, error) {
	if m.IsPercent {
		return json.Marshal(fmt.Sprintf("%d%%", m.Percent))
	}
	return json.Marshal(m.Slots)
}

// UnmarshalJSON reads a number of slots or a string "N%" (or "N").
func (m *Max) UnmarshalJSON(b []byte) error {
	var n json.Number
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	switch x := v.(type) {
	case json.Number:
		n = x
	case string:
		s := strings.TrimSpace(x)
		if p, ok := strings.CutSuffix(s, "%"); ok {
			pct, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
			if err != nil {
				return fmt.Errorf("max %q: percentage must be a whole number like \"40%%\"", x)
			}
			*m = Max{Percent: pct, IsPercent: true}
			return nil
		}
		n = json.Number(s)
	default:
		return fmt.Errorf("max must be a number of slots or a percentage like \"40%%\", got %s", string(b))
	}
	slots, err := n.Int64()
	if err != nil {
		return fmt.Errorf("max %s: must be a whole number of slots", n)
	}
	*m = Max{Slots: slots}
	return nil
}

// String renders the max as written in a plan.
func (m Max) String() string {
	if m.IsPercent {
		return fmt.Sprintf("%d%%", m.Percent)
	}
	return strconv.FormatInt(m.Slots, 10)
}

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// maxDurationSeconds is the most seconds a time.Duration holds.
const maxDurationSeconds = int64(math.MaxInt64 / time.Second)

// UnmarshalJSON reads a Go duration string, or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var secs int64
		if err2 := json.Unmarshal(b, &secs); err2 != nil {
			return fmt.Errorf("duration must be a string like \"30s\" or a number of seconds")
		}
		// time.Duration counts nanoseconds in an int64: a number of
		// seconds past ±9,223,372,036 would wrap around (-2^63 s to 0s,
		// 18446744074 s, 584 years, to 0.29 s) and be stored so.
		if secs > maxDurationSeconds || secs < -maxDurationSeconds {
			return fmt.Errorf("duration of %d seconds is out of range: at most %d seconds (about 292 years) either way", secs, maxDurationSeconds)
		}
		d.Duration = time.Duration(secs) * time.Second
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %.64q is not a duration like \"30s\", \"5m\" or \"1h30m\" (units ns, us, ms, s, m, h; at most 2562047h47m16.854775807s)", s)
	}
	d.Duration = v
	return nil
}
