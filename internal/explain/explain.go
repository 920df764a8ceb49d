package explain

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/domain"
)

// Story collects what happened to one consumer.
type Story struct {
	consumer string
	entries  []entry
	keep     int
	own      map[string][]ownFact // by host: the consumer's ownership story (ownership.go)
}

type entry struct {
	seq  uint64
	at   time.Time
	text string
}

// New starts the story of consumer, keeping its last keep decisions.
func New(consumer string, keep int) *Story { return &Story{consumer: consumer, keep: keep} }

// After is called after each applied event with the event's decisions.
func (s *Story) After(p *domain.Pool, seq uint64, at time.Time, ds []domain.Decision) {
	for _, d := range ds {
		if d.Consumer != s.consumer && d.From != s.consumer {
			continue
		}
		s.entries = append(s.entries, entry{seq, at, describe(p, d, ds, s.consumer)})
		if len(s.entries) > s.keep {
			s.entries = s.entries[1:]
		}
		s.noteOwnership(p, seq, at, d)
	}
}

// Write prints the consumer's state and its story.
func (s *Story) Write(w io.Writer, p *domain.Pool) error {
	c, ok := p.Consumer(s.consumer)
	if !ok {
		return fmt.Errorf("consumer %s is not in the plan of pool %s at sequence %d", s.consumer, p.Name(), p.Seq())
	}
	pol := p.Policy()
	fmt.Fprintf(w, "%s in pool %s at sequence %d (%s)\n", c.Path, p.Name(), p.Seq(), p.Time().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "  rules version %d, since the plan at sequence %d\n", int(pol.Rules), p.RulesSince())
	fmt.Fprintf(w, "  policy: %s\n", PolicyText(pol))
	fmt.Fprintf(w, "  demand %d (effective %d after max), planned share %d, %s %d, holds %d", c.Demand, c.Effective, c.Planned, targetName(pol), c.Target, c.Allocated)
	if c.Borrowed > 0 {
		fmt.Fprintf(w, " (%d borrowed above its planned share)", c.Borrowed)
	}
	fmt.Fprintln(w)
	var hosts []string
	for _, a := range p.Allocations() {
		if a.Consumer == c.Path {
			hosts = append(hosts, fmt.Sprintf("%s %d", a.Host, a.Slots))
		}
	}
	if len(hosts) > 0 {
		fmt.Fprintf(w, "  on hosts: %s\n", strings.Join(hosts, ", "))
	}
	var own strings.Builder
	s.writeOwnership(&own, p, c)
	io.WriteString(w, own.String())
	if len(s.entries) == 0 {
		fmt.Fprintln(w, "  no decision has changed its allocation yet")
		return nil
	}
	fmt.Fprintf(w, "  how it got there (last %d decisions):\n", len(s.entries))
	for _, e := range s.entries {
		fmt.Fprintf(w, "    seq %d (%s): %s\n", e.seq, e.at.Format(time.RFC3339), e.text)
	}
	return nil
}

// PolicyText is the policy in an operator's words.
func PolicyText(pol domain.Policy) string {
	s := fmt.Sprintf("reclaim %s, enforcement %s, preemption %t", pol.Reclaim, pol.Enforcement, pol.Preemption)
	if pol.Reclaim == "share_ratio" && !pol.Balance {
		s += ", balance false (reclaim restores planned shares only)"
	}
	if pol.PriorityBands {
		s += ", priority bands (the surplus to the higher priorities first)"
	}
	return s
}

func targetName(pol domain.Policy) string {
	if pol.Reclaim == "share_ratio" {
		return "target"
	}
	return "guaranteed share G"
}

func plural(n int64) string {
	if n == 1 {
		return "1 slot"
	}
	return fmt.Sprintf("%d slots", n)
}

// Describe explains one decision in words, with the pool's state right
// after the event that made it and all of that event's decisions (a
// victim's standing before it gave is read from them).
func Describe(p *domain.Pool, d domain.Decision, all []domain.Decision) string {
	return describe(p, d, all, d.Consumer)
}
