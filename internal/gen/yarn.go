package gen

import "github.com/cluster-ledger/ledger/events"

// withYARN draws rules version 4's fields into a plan when the generator
// is yarn: the plan names rules 4; under share_ratio, priority_bands (on
// half the time) and zero shares; under either policy, preemptable true
// or false on some consumers. A zero share under priority (refused:
// invalid_share) is drawn now and then.
func (g *generator) withYARN(p events.Plan) events.Plan {
	if !g.yarn {
		return p
	}
	p.Rules = 4
	shareRatio := p.Policy.Reclaim == events.ReclaimShareRatio
	if shareRatio {
		switch g.src.Intn(6) {
		case 0, 1, 2:
			on := true
			p.Policy.PriorityBands = &on
		case 3:
			off := false
			p.Policy.PriorityBands = &off
		}
	}
	for i := range p.Consumers {
		c := &p.Consumers[i]
		switch g.src.Intn(8) {
		case 0, 1:
			no := false
			c.Preemptable = &no
		case 2:
			yes := true
			c.Preemptable = &yes
		}
		if (shareRatio && g.src.Intn(5) == 0) || g.src.Intn(60) == 0 {
			zero := int64(0)
			c.Share = &zero
		}
	}
	return p
}
