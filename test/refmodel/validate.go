package refmodel

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/cluster-ledger/ledger/events"
)

// Limits of decisions.md #5.
const (
	limitSlots     = int64(1) << 40
	limitShare     = int64(1) << 22
	limitConsumers = 1 << 20
)

// Reasons an event is refused. Match with errors.Is.
var (
	ErrNoPlan          = errors.New("no plan yet")
	ErrUnknownConsumer = errors.New("unknown consumer")
	ErrNotLeaf         = errors.New("consumer is a parent, not a leaf")
	ErrNegativeSlots   = errors.New("negative slots")
	ErrNonPositive     = errors.New("slots must be positive")
	ErrReleaseTooMuch  = errors.New("release exceeds held slots")
	ErrEmptyDemand     = errors.New("demand event without entries")
	ErrUnknownHost     = errors.New("unknown host")
	ErrHostUp          = errors.New("host already up")
	ErrHostDown        = errors.New("host already down")
	ErrBadHost         = errors.New("malformed host")
	ErrMalformedPlan   = errors.New("malformed plan")
	ErrOverflow        = errors.New("value above the overflow limits")
	ErrBadPayload      = errors.New("unknown or nil payload")
	// ErrUnknownRules: the plan names a rules version the model does not
	// implement (docs/rules.md#versions); only 1 and 2 exist.
	ErrUnknownRules = errors.New("unknown rules version")
	// Refusals of rules-v4.md D.1.5 (rules 4 plans).
	ErrInvalidShare             = errors.New("invalid share")
	ErrInvalidPlan              = errors.New("invalid plan")
	ErrUnsupportedWithOwnership = errors.New("unsupported with ownership")
)

// Rules versions the model implements (docs/rules.md#versions).
const (
	rulesV1 = 1 // release excess, then trim slots on down hosts
	rulesV2 = 2 // trim slots on down hosts, then release excess
	// rulesV3 is the project's version for ownership (docs/decisions.md
	// #88), not one of the spec's: version 2's order, with ownership
	// folded under every policy. Only a model made by NewRules3 accepts it.
	rulesV3 = 3
	// rulesV4 is shared/spec/rules-v4.md: version 3 with section 5
	// settled (v4.go, seating.go) and part D's plan fields (split.go).
	// Only a model made by NewRules4 accepts it.
	rulesV4 = 4
)

// validPath implements decisions.md #2.
func validPath(p string) bool {
	if len(p) < 2 || p[0] != '/' || strings.HasSuffix(p, "/") {
		return false
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for _, r := range seg {
			if unicode.IsSpace(r) || unicode.IsControl(r) {
				return false
			}
		}
	}
	return true
}

func parentOf(p string) string {
	i := strings.LastIndex(p, "/")
	if i == 0 {
		return root
	}
	return p[:i]
}

type policy struct {
	reclaim, enforcement string
	preemption           bool
	// balance is false only for share_ratio with `balance: false`.
	balance bool
	// rules is the rules version: the plan's, 1 when it names none.
	rules int
	// reclaimForPreference (docs/rules.md#ownership-placement): owners take
	// back their most preferred slots even while idle slots exist elsewhere.
	reclaimForPreference bool
	// priorityBands (rules 4, share_ratio): the surplus above the
	// guarantees goes to higher priorities first (rules-v4.md D.1.3).
	priorityBands bool
	// pins: some leaf is not preemptable (rules 4): the pool's splits
	// have floors (D.1.3).
	pins bool
}

// buildPlanUpTo is buildPlan for a model that implements the rules
// versions 1..newest.
func buildPlanUpTo(pl events.Plan, newest int) (map[string]*node, policy, error) {
	pol := policy{reclaim: pl.Policy.ReclaimOrDefault(), enforcement: pl.Policy.EnforcementOrDefault(),
		preemption: pl.Policy.PreemptionOrDefault(), balance: pl.Policy.BalanceOrDefault(), rules: pl.Rules}
	if pol.rules == 0 { // a stored plan without the field predates versions
		pol.rules = rulesV1
	}
	if pol.rules < rulesV1 || pol.rules > newest {
		return nil, pol, fmt.Errorf("%w: rules %d (this model implements 1 to %d)", ErrUnknownRules, pl.Rules, newest)
	}
	if pol.reclaim != events.ReclaimPriority && pol.reclaim != events.ReclaimShareRatio {
		return nil, pol, fmt.Errorf("%w: reclaim %q", ErrMalformedPlan, pol.reclaim)
	}
	// balance is a share_ratio option: named under priority (true or false)
	// it can only be a mistake, so the plan is refused (AMBIGUITIES.md).
	if pl.Policy.Balance != nil && pol.reclaim != events.ReclaimShareRatio {
		return nil, pol, fmt.Errorf("%w: balance is a share_ratio option, reclaim is %q", ErrMalformedPlan, pol.reclaim)
	}
	if pol.enforcement != events.EnforcementLeaf && pol.enforcement != events.EnforcementParent {
		return nil, pol, fmt.Errorf("%w: enforcement %q", ErrMalformedPlan, pol.enforcement)
	}
	if len(pl.Consumers) == 0 {
		return nil, pol, fmt.Errorf("%w: no consumers (decisions.md #6)", ErrMalformedPlan)
	}
	if len(pl.Consumers) > limitConsumers {
		return nil, pol, fmt.Errorf("%w: more than 2^20 consumers", ErrOverflow)
	}
	nodes := map[string]*node{root: {path: root, share: 1}}
	for _, c := range pl.Consumers {
		if !validPath(c.Path) {
			return nil, pol, fmt.Errorf("%w: bad path %q", ErrMalformedPlan, c.Path)
		}
		if _, dup := nodes[c.Path]; dup {
			return nil, pol, fmt.Errorf("%w: duplicate path %q", ErrMalformedPlan, c.Path)
		}
		share := c.ShareOrDefault()
		switch {
		case pol.rules >= rulesV4 && share < 0:
			return nil, pol, fmt.Errorf("%w: %s: share %d", ErrInvalidShare, c.Path, share)
		case pol.rules >= rulesV4 && share == 0 && pol.reclaim != events.ReclaimShareRatio:
			// rules-v4.md D.1.5: a zero share only with share_ratio
			return nil, pol, fmt.Errorf("%w: %s: share 0 under reclaim %s", ErrInvalidShare, c.Path, pol.reclaim)
		case share < 1 && !(share == 0 && pol.rules >= rulesV4):
			return nil, pol, fmt.Errorf("%w: %s: share %d", ErrMalformedPlan, c.Path, share)
		}
		if share > limitShare {
			return nil, pol, fmt.Errorf("%w: %s: share %d", ErrOverflow, c.Path, share)
		}
		if c.Max != nil {
			if c.Max.IsPercent && (c.Max.Percent < 1 || c.Max.Percent > 100) {
				return nil, pol, fmt.Errorf("%w: %s: max %d%%", ErrMalformedPlan, c.Path, c.Max.Percent)
			}
			if !c.Max.IsPercent && c.Max.Slots < 0 {
				return nil, pol, fmt.Errorf("%w: %s: max %d", ErrMalformedPlan, c.Path, c.Max.Slots)
			}
			if !c.Max.IsPercent && c.Max.Slots > limitSlots {
				return nil, pol, fmt.Errorf("%w: %s: max %d", ErrOverflow, c.Path, c.Max.Slots)
			}
		}
		if c.BorrowLimit != nil && *c.BorrowLimit < 0 {
			return nil, pol, fmt.Errorf("%w: %s: borrow_limit %d", ErrMalformedPlan, c.Path, *c.BorrowLimit)
		}
		if c.BorrowLimit != nil && *c.BorrowLimit > limitSlots {
			return nil, pol, fmt.Errorf("%w: %s: borrow_limit %d", ErrOverflow, c.Path, *c.BorrowLimit)
		}
		for _, g := range []*events.Duration{c.ReclaimGrace, c.LendGrace} {
			if g != nil && g.Duration < 0 {
				return nil, pol, fmt.Errorf("%w: %s: negative grace period", ErrMalformedPlan, c.Path)
			}
		}
		n := &node{path: c.Path, share: share, priority: c.Priority, borrowLimit: c.BorrowLimit, lend: true}
		n.lendGrace, n.reclaimGrace = graceOf(c)
		if c.Max != nil {
			mx := *c.Max
			n.max = &mx
		}
		nodes[c.Path] = n
	}
	// parents implied by a child's path: share 1, priority 0, no max (decisions.md #3)
	var listed []string
	for p := range nodes {
		listed = append(listed, p)
	}
	for _, p := range listed {
		for q := parentOf(p); p != root && q != root; q = parentOf(q) {
			if _, ok := nodes[q]; !ok {
				nodes[q] = &node{path: q, share: 1, lend: true}
			}
		}
	}
	if len(nodes)-1 > limitConsumers {
		return nil, pol, fmt.Errorf("%w: more than 2^20 consumers", ErrOverflow)
	}
	var all []string
	for p := range nodes {
		all = append(all, p)
	}
	sort.Strings(all)
	for _, p := range all {
		if p == root {
			continue
		}
		par := nodes[parentOf(p)]
		par.children = append(par.children, p)
		nodes[p].depth = strings.Count(p, "/")
	}
	for _, p := range all {
		var sum int64
		for _, ch := range nodes[p].children {
			sum += nodes[ch].share
		}
		if sum > limitShare {
			return nil, pol, fmt.Errorf("%w: shares under %s add up to %d", ErrOverflow, p, sum)
		}
	}
	return nodes, pol, nil
}
