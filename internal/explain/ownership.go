package explain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
)

// Ownership stories (docs/rules.md#ownership): what a consumer
// owns, where, at which rank and preference; what it lent while idle and
// to whom, through which pool; when it took its slots back and by when
// the borrower had to give them up.

// ownFact is one event in the ownership story of a host.
type ownFact struct {
	seq  uint64
	text string
}

// noteOwnership records the ownership facts of one decision about the
// story's consumer: an own decision, a lend of its slots, a return to it.
func (s *Story) noteOwnership(p *domain.Pool, seq uint64, at time.Time, d domain.Decision) {
	var text string
	switch {
	case d.Kind == domain.KindOwn && d.Consumer == s.consumer:
		text = ownFactText(p, d)
	case d.Kind == domain.KindLend && d.From == s.consumer:
		text = fmt.Sprintf("%d %s lent to %s through %s at seq %d while %s", d.Slots, wereWas(d.Slots), d.Consumer,
			poolPhrase(d.From, d.Consumer), seq, ownerUse(p, d.From))
	case d.Kind == domain.KindReturn && d.Consumer == s.consumer:
		who, _ := p.Consumer(d.Consumer)
		text = fmt.Sprintf("at seq %d %s asked for %d and took %d back (return from %s%s)", seq, d.Consumer, who.Demand, d.Slots, d.From, deadlineText(p, d, at))
	default:
		return
	}
	if s.own == nil {
		s.own = map[string][]ownFact{}
	}
	facts := append(s.own[d.Host], ownFact{seq, text})
	if len(facts) > s.keep {
		facts = facts[len(facts)-s.keep:]
	}
	s.own[d.Host] = facts
}

func ownFactText(p *domain.Pool, d domain.Decision) string {
	switch d.Rule {
	case domain.RuleOwnAssign:
		return fmt.Sprintf("it was assigned %s of it at seq %d", plural(d.Slots), d.Seq)
	case domain.RuleOwnDrop:
		return fmt.Sprintf("at seq %d the plan stopped giving it %s of it (own.drop)", d.Seq, plural(d.Slots))
	default:
		return fmt.Sprintf("at seq %d it lost the ownership of %s of it (own.trim: %s)", d.Seq, plural(d.Slots), trimCause(p, d))
	}
}

// writeOwnership prints the consumer's ownership: its figures, the layers
// its slots come from, and a story per host it owns or owned.
func (s *Story) writeOwnership(w *strings.Builder, p *domain.Pool, c domain.ConsumerView) {
	if c.Owned == 0 && c.Sources == nil && len(s.own) == 0 {
		return
	}
	if c.Owned > 0 || c.LentOut > 0 {
		fmt.Fprintf(w, "  owns %s (used by itself%s: %d, lent out: %d)\n", plural(c.Owned), subtreeWord(c), c.OwnUsed, c.LentOut)
	}
	if len(c.Sources) > 0 {
		var parts []string
		for _, src := range c.Sources {
			parts = append(parts, fmt.Sprintf("%s %d", sourceText(src), src.Slots))
		}
		fmt.Fprintf(w, "  its slots come from: %s\n", strings.Join(parts, ", "))
	}
	owned := map[string]int64{}
	for _, o := range p.Ownership() {
		if o.Consumer == c.Path {
			owned[o.Host] += o.Slots
		}
	}
	var hosts []string
	for h := range owned {
		hosts = append(hosts, h)
	}
	for h := range s.own {
		if _, ok := owned[h]; !ok {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return
	}
	slices.Sort(hosts)
	plan := planOf(p)
	fmt.Fprintln(w, "  ownership:")
	for _, h := range hosts {
		var head string
		if n := owned[h]; n > 0 {
			head = fmt.Sprintf("%s owns %s on %s (%s)", c.Path, plural(n), h, rankText(p, plan, c.Path, h))
		} else {
			head = fmt.Sprintf("%s owns nothing on %s now", c.Path, h)
		}
		facts := []string{head}
		for _, f := range s.own[h] {
			facts = append(facts, f.text)
		}
		fmt.Fprintf(w, "    %s\n", strings.Join(facts, "; "))
	}
}

func subtreeWord(c domain.ConsumerView) string {
	if c.Leaf {
		return ""
	}
	return " and its subtree"
}

// sourceText names the layer of a leaf's slots.
func sourceText(src domain.Source) string {
	var s string
	switch src.Pool {
	case domain.SourceOwn:
		s = "its own slots"
	case "/":
		s = "/'s public pool"
	default:
		s = src.Pool + "'s private pool"
	}
	if src.Lender != "" {
		s += " (lent by " + src.Lender + ")"
	}
	return s
}

// describeOwnership explains the decisions of kinds own, lend and return
// and the rules of placement with ownership; ok is false for any other.
func describeOwnership(p *domain.Pool, d domain.Decision, all []domain.Decision, subject string) (string, bool) {
	at := p.Time()
	switch {
	case d.Kind == domain.KindOwn:
		return describeOwn(p, d), true
	case d.Kind == domain.KindLend:
		pool := poolPhrase(d.From, d.Consumer)
		head := fmt.Sprintf("%s borrowed %s owned by %s on %s [%s, lend]", d.Consumer, plural(d.Slots), d.From, d.Host, d.Rule)
		if subject == d.From && subject != d.Consumer {
			head = fmt.Sprintf("%s of %s's owned slots on %s %s lent to %s [%s, lend]", countOf(d.Slots), d.From, d.Host, wereWas(d.Slots), d.Consumer, d.Rule)
		}
		why := fmt.Sprintf(": %s did not need them (%s), so they went to %s through %s", d.From, ownerUseNow(p, d.From), d.Consumer, pool)
		if who, ok := p.Consumer(d.Consumer); ok {
			why += fmt.Sprintf(", where its %s is %d", targetName(p.Policy()), who.Target)
		}
		return head + why + fmt.Sprintf("; %s takes them back (return) as soon as it needs them%s", d.From, graceText(p, d.From)), true
	case d.Kind == domain.KindReturn:
		owner, _ := p.Consumer(d.Consumer)
		head := fmt.Sprintf("%s took %s back from %s on %s [%s, return]", d.Consumer, plural(d.Slots), d.From, d.Host, d.Rule)
		if subject == d.From && subject != d.Consumer {
			head = fmt.Sprintf("%s gave %s on %s back to %s [%s, return]", d.From, plural(d.Slots), d.Host, d.Consumer, d.Rule)
		}
		return head + fmt.Sprintf(": %s asked for %d and %s; an owner takes its lent slots back before any share rule applies (even with preemption false)%s",
			d.Consumer, owner.Demand, whoseSlots(p, d), deadlineText(p, d, at)), true
	case d.Rule == domain.RuleOwnUse:
		who, _ := p.Consumer(d.Consumer)
		return fmt.Sprintf("%s used %s it owns on %s [%s]: a leaf uses its own slots first, min(effective demand %d, owned %d), most preferred first",
			d.Consumer, plural(d.Slots), d.Host, d.Rule, who.Effective, who.Owned), true
	case d.Rule == domain.RuleLendRevoked:
		return fmt.Sprintf("%s released %s on %s [%s]: the plan or host change left them on slots it may no longer hold (their owner stopped lending them to it, or lends them with a grace shorter than its reclaim_grace) and no other part of the host could take them; its work there has their owner's lend_grace to end%s",
			d.Consumer, plural(d.Slots), d.Host, d.Rule, releaseDeadlineText(d, at)), true
	case d.Rule == domain.RuleMoved:
		return fmt.Sprintf("%s released %s on %s [%s]: the layer these slots came from is now served on other hosts (a leaf's slots sit in the tier they come from: its own hosts, then its ancestors' private hosts, then public hosts, then hosts lent by others), so they moved%s%s",
			d.Consumer, plural(d.Slots), d.Host, d.Rule, movedTo(all, d), releaseDeadlineText(d, at)), true
	}
	return "", false
}

func describeOwn(p *domain.Pool, d domain.Decision) string {
	now := ownedOn(p, d.Consumer, d.Host)
	plan := planOf(p)
	switch d.Rule {
	case domain.RuleOwnAssign:
		from := "the up hosts"
		if parent := parentOf(d.Consumer); parent != "/" {
			from = parent + "'s owned slots"
		}
		return fmt.Sprintf("%s was assigned the ownership of %s on %s [%s]: %s; ownership is assigned from %s, siblings by rank (priority, then path), each consumer's entries by preference; it owns %s there now (%s)",
			d.Consumer, plural(d.Slots), d.Host, d.Rule, entriesText(plan, p, d.Consumer, d.Host), from, plural(now), rankText(p, plan, d.Consumer, d.Host))
	case domain.RuleOwnDrop:
		return fmt.Sprintf("%s no longer owns %s on %s [%s]: the plan no longer gives them to it; it owns %s there now",
			d.Consumer, plural(d.Slots), d.Host, d.Rule, plural(now))
	default:
		return fmt.Sprintf("%s lost the ownership of %s on %s [%s]: %s; it owns %s there now",
			d.Consumer, plural(d.Slots), d.Host, d.Rule, trimCause(p, d), plural(now))
	}
}

// trimCause says why ownership was trimmed: the host down, or a shrunken
// group or parent, or a higher-ranked sibling.
func trimCause(p *domain.Pool, d domain.Decision) string {
	for _, h := range p.Hosts() {
		if h.Name == d.Host && !h.Up {
			return "the host went down"
		}
	}
	return fmt.Sprintf("the slots it can own there shrank (its group or its parent's ownership), or a higher-ranked sibling took them (it is %s)", rankText(p, nil, d.Consumer, ""))
}

// ownedOn is how many slots of host consumer owns now.
func ownedOn(p *domain.Pool, consumer, host string) int64 {
	var n int64
	for _, o := range p.Ownership() {
		if o.Consumer == consumer && o.Host == host {
			n += o.Slots
		}
	}
	return n
}

// rankText is "rank R, preference P": the consumer's rank among its
// siblings (priority desc, then path) and its preference for host (left
// out when unknown or when no entry of its own names the host).
func rankText(p *domain.Pool, plan *events.Plan, consumer, host string) string {
	s := fmt.Sprintf("rank %d", rankOf(p, consumer))
	if host != "" {
		if pref := preferenceOf(p, plan, consumer, host); pref > 0 {
			s += fmt.Sprintf(", preference %d", pref)
		}
	}
	return s
}

// rankOf is the consumer's rank among its siblings, 1 first: priority
// desc, then path (the order assignment serves them in).
func rankOf(p *domain.Pool, consumer string) int {
	me, ok := p.Consumer(consumer)
	if !ok {
		return 0
	}
	var sibs []domain.ConsumerView
	for _, c := range p.Consumers() {
		if c.Parent == me.Parent {
			sibs = append(sibs, c)
		}
	}
	slices.SortFunc(sibs, func(a, b domain.ConsumerView) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), strings.Compare(a.Path, b.Path))
	})
	return slices.IndexFunc(sibs, func(c domain.ConsumerView) bool { return c.Path == consumer }) + 1
}

// preferenceOf is the highest preference of the consumer's entries that
// name the host or its group (0: none, or the plan is unknown).
func preferenceOf(p *domain.Pool, plan *events.Plan, consumer, host string) int64 {
	c := planConsumer(plan, consumer)
	if c == nil {
		return 0
	}
	group := hostGroup(p, host)
	best := int64(0)
	for _, e := range c.Own {
		if e.Host == host || (e.Host == "" && e.Group == group) {
			best = max(best, e.PreferenceOrDefault())
		}
	}
	return best
}

// entriesText quotes the consumer's plan entries that cover the host.
func entriesText(plan *events.Plan, p *domain.Pool, consumer, host string) string {
	c := planConsumer(plan, consumer)
	if c == nil {
		return "its plan names ownership"
	}
	group := hostGroup(p, host)
	var es []string
	for _, e := range c.Own {
		switch {
		case e.Host == host && e.Slots == nil:
			es = append(es, "all of host "+host)
		case e.Host == host:
			es = append(es, fmt.Sprintf("%s of host %s", plural(*e.Slots), host))
		case e.Host == "" && e.Group == group && e.Slots != nil:
			es = append(es, fmt.Sprintf("%s of group %s", plural(*e.Slots), group))
		default:
			continue
		}
		es[len(es)-1] += fmt.Sprintf(" (preference %d)", e.PreferenceOrDefault())
	}
	if len(es) == 0 {
		return "its parent's slots here are assigned on to it"
	}
	return "its plan gives it " + strings.Join(es, " and ")
}

func hostGroup(p *domain.Pool, host string) string {
	for _, h := range p.Hosts() {
		if h.Name == host {
			return h.Group
		}
	}
	return ""
}

func planConsumer(plan *events.Plan, path string) *events.Consumer {
	if plan == nil {
		return nil
	}
	for i := range plan.Consumers {
		if plan.Consumers[i].Path == path {
			return &plan.Consumers[i]
		}
	}
	return nil
}

// planOf is the pool's plan in force; nil when it has none.
func planOf(p *domain.Pool) *events.Plan {
	plan, ok := p.Plan()
	if !ok {
		return nil
	}
	return &plan
}

// graceText is ", within its lend grace G" for an owner with a lend grace.
func graceText(p *domain.Pool, owner string) string {
	c := planConsumer(planOf(p), owner)
	if c == nil || c.LendGrace == nil || c.LendGrace.Duration == 0 {
		return ""
	}
	return fmt.Sprintf(", and its lend grace gives the borrower %s to give them up", shortDuration(c.LendGrace.Duration))
}

// lenderOf is whose lend grace sets a return's deadline: the consumer
// that took the slots back when it owns slots of the host, else its
// nearest ancestor that does (the slots were its private pool's).
func lenderOf(p *domain.Pool, d domain.Decision) string {
	owners := map[string]bool{}
	for _, o := range p.Ownership() {
		if o.Host == d.Host {
			owners[o.Consumer] = true
		}
	}
	for c := d.Consumer; c != "/"; c = parentOf(c) {
		if owners[c] {
			return c
		}
	}
	return d.Consumer
}

func whoseSlots(p *domain.Pool, d domain.Decision) string {
	if l := lenderOf(p, d); l != d.Consumer {
		return fmt.Sprintf("these slots are %s's private pool, which its descendants use before anyone outside it", l)
	}
	return "these slots are its own"
}

// deadlineText is ", deadline T, L's lend grace G": the deadline is the
// event's time plus the lender's lend grace.
func deadlineText(p *domain.Pool, d domain.Decision, at time.Time) string {
	if d.Deadline == nil {
		return ""
	}
	return fmt.Sprintf(", deadline %s, %s's lend grace %s", clock(*d.Deadline, at), lenderOf(p, d), shortDuration(d.Deadline.Sub(at)))
}

// releaseDeadlineText names a release's deadline and how long after the
// event it falls (rules 4 gives a move and a revoked lend one); "" without.
func releaseDeadlineText(d domain.Decision, at time.Time) string {
	if d.Deadline == nil {
		return ""
	}
	return fmt.Sprintf(" (deadline %s, %s after the event)", clock(*d.Deadline, at), shortDuration(d.Deadline.Sub(at)))
}

// clock prints a deadline: the time of day when it falls on the event's
// day (UTC), else the whole time.
func clock(t, at time.Time) string {
	t, at = t.UTC(), at.UTC()
	if t.Format(time.DateOnly) == at.Format(time.DateOnly) {
		return t.Format(time.TimeOnly)
	}
	return t.Format(time.RFC3339)
}

// shortDuration prints 5m rather than 5m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// poolPhrase names the pool slots of owner reach borrower through: the
// private pool of their nearest common ancestor, or the public pool.
func poolPhrase(owner, borrower string) string {
	a := commonAncestor(owner, borrower)
	if a == "/" {
		return "/'s public pool"
	}
	return a + "'s private pool"
}

func commonAncestor(a, b string) string {
	for x := parentOf(a); x != "/"; x = parentOf(x) {
		if strings.HasPrefix(b, x+"/") {
			return x
		}
	}
	return "/"
}

func parentOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// ownerUse says how much of its owned slots owner used, after the event:
// "X was idle" or "X used only U of its O owned slots".
func ownerUse(p *domain.Pool, owner string) string {
	c, _ := p.Consumer(owner)
	if c.OwnUsed == 0 {
		return owner + " was idle"
	}
	return fmt.Sprintf("%s used only %d of its %d owned slots", owner, c.OwnUsed, c.Owned)
}

func ownerUseNow(p *domain.Pool, owner string) string {
	c, _ := p.Consumer(owner)
	if c.OwnUsed == 0 {
		return fmt.Sprintf("demand %d, none of its %d owned slots in use", c.Demand, c.Owned)
	}
	return fmt.Sprintf("demand %d, %d of its %d owned slots in use", c.Demand, c.OwnUsed, c.Owned)
}

// movedTo names where the released slots went: the consumer's gains on
// other hosts in the same event.
func movedTo(all []domain.Decision, d domain.Decision) string {
	var to []string
	for _, o := range all {
		if o.Consumer == d.Consumer && o.Host != d.Host && o.Delta(d.Consumer) > 0 {
			to = append(to, fmt.Sprintf("%d on %s [%s]", o.Slots, o.Host, o.Rule))
		}
	}
	if len(to) == 0 {
		return ""
	}
	return ": " + d.Consumer + " gained " + strings.Join(to, ", ") + " in the same event"
}

func wereWas(n int64) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

func countOf(n int64) string {
	if n == 1 {
		return "1 slot"
	}
	return fmt.Sprint(n)
}
