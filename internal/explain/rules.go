package explain

import (
	"fmt"
	"strings"

	"github.com/cluster-ledger/ledger/domain"
)

// describe explains one decision in words.
func describe(p *domain.Pool, d domain.Decision, all []domain.Decision, subject string) string {
	if text, ok := describeOwnership(p, d, all, subject); ok {
		return text
	}
	who, _ := p.Consumer(d.Consumer)
	from := ""
	if d.From != "" {
		from = " from " + d.From
	}
	head := fmt.Sprintf("%s %s %s%s on %s [%s]", d.Consumer, verb(d.Kind), plural(d.Slots), from, d.Host, d.Rule)
	switch d.Rule {
	case domain.RulePriorityEntitled:
		return head + fmt.Sprintf(": it was below what it is entitled to, min(effective demand %d, guaranteed share %d), and slots were free; entitled consumers are served first, highest priority first", who.Effective, who.Target)
	case domain.RulePriorityBorrow:
		return head + ": it already had its guaranteed share and still had demand; free slots nobody was entitled to are lent first-come first-served (earliest waiting first, then priority), up to its share plus its borrow limit"
	case domain.RulePriorityReclaim:
		return head + ": " + whyPriorityVictim(p, d, all)
	case domain.RuleShareRatioGrant:
		return head + fmt.Sprintf(": its share-ratio target is %d and slots were free", who.Target)
	case domain.RuleShareRatioReclaim:
		return head + ": " + whyShareRatioVictim(p, d, all)
	case domain.RuleDemandDropped:
		return head + ": its demand fell below what it held"
	case domain.RuleMaxLowered:
		return head + ": a max above it shrank below what it held"
	case domain.RuleParentMax:
		return head + ": a parent was above its max; the excess comes back from its leaves, lowest priority first, then the largest allocation"
	case domain.RuleReleaseFinished:
		return head + ": its work finished (a release event)"
	case domain.RuleConsumerRemoved:
		return head + ": a plan change removed it (or made it a parent)"
	case domain.RuleHostDown:
		return head + ": the host went down; its demand is unchanged, so it may be served elsewhere"
	}
	return head
}

func verb(k domain.Kind) string {
	switch k {
	case domain.KindGrant:
		return "was granted"
	case domain.KindReclaim:
		return "reclaimed"
	case domain.KindRelease:
		return "released"
	case domain.KindTrim:
		return "lost"
	}
	return string(k)
}

// whyPriorityVictim explains the choice of victim in priority mode with the
// victim's standing before it gave: the four keys of the victim order.
func whyPriorityVictim(p *domain.Pool, d domain.Decision, all []domain.Decision) string {
	claimant, _ := p.Consumer(d.Consumer)
	victim, _ := p.Consumer(d.From)
	given := givenBy(all, d.From)
	borrowed := victim.Allocated + given - victim.Target
	var b strings.Builder
	fmt.Fprintf(&b, "%s (priority %d) was entitled to %d and no slot was free, so it took slots back from a borrower. ", d.Consumer, claimant.Priority, min(claimant.Effective, claimant.Target))
	top, _ := p.Consumer(topOf(d.From))
	if top.Allocated+given > top.Planned {
		fmt.Fprintf(&b, "%s was chosen because its top-level branch %s used %d slots, more than its planned share %d; ", d.From, top.Path, top.Allocated+given, top.Planned)
	} else {
		fmt.Fprintf(&b, "%s was chosen among the borrowers; ", d.From)
	}
	fmt.Fprintf(&b, "it had the lowest priority (%d%s), and it borrowed %s above its guaranteed share %d", victim.Priority, otherBorrowers(p, d.From, d.Consumer), plural(borrowed), victim.Target)
	return b.String()
}

// otherBorrowers lists other consumers above their guarantee, for contrast.
func otherBorrowers(p *domain.Pool, victim, claimant string) string {
	var others []string
	for _, c := range p.Consumers() {
		if c.Leaf && c.Path != victim && c.Path != claimant && c.Allocated > c.Target {
			others = append(others, fmt.Sprintf("%s has %d", c.Path, c.Priority))
		}
	}
	if len(others) == 0 {
		return ""
	}
	return "; among the other borrowers " + strings.Join(others, ", ")
}

func whyShareRatioVictim(p *domain.Pool, d domain.Decision, all []domain.Decision) string {
	claimant, _ := p.Consumer(d.Consumer)
	victim, _ := p.Consumer(d.From)
	held := victim.Allocated + givenBy(all, d.From)
	if !p.Policy().Balance {
		return fmt.Sprintf("balance is false, so reclaim only gives a consumer back its planned share and never lifts one above its own: %s's planned share is %d; %s held %d, more than it may keep (the larger of its planned share %d and what it held, as far as the pool's share ratios allow), so it gave to %s (over-allocated consumers give in a top-down walk, most over-allocated per unit of share first, ties to the lowest priority)",
			d.Consumer, claimant.Planned, d.From, held, victim.Planned, d.Consumer)
	}
	return fmt.Sprintf("share ratios across the tree give %s a target of %d and %s a target of %d; %s held %d, %s above its target, so it gave to %s (over-allocated consumers give in a top-down walk, most over-allocated per unit of share first, ties to the lowest priority)",
		d.Consumer, claimant.Target, d.From, victim.Target, d.From, held, plural(held-victim.Target), d.Consumer)
}

func givenBy(ds []domain.Decision, victim string) int64 {
	var n int64
	for _, d := range ds {
		if d.Kind == domain.KindReclaim && d.From == victim {
			n += d.Slots
		}
	}
	return n
}

func topOf(path string) string {
	if i := strings.IndexByte(path[1:], '/'); i >= 0 {
		return path[:i+1]
	}
	return path
}
