package domain

import (
	"github.com/cluster-ledger/ledger/events"
)

// applyPlan replaces the tree. Leaves that disappear, or become parents,
// release everything; surviving leaves keep demand, allocation and waiting
// since (decisions.md #16).
func (p *Pool) applyPlan(plan events.Plan, nt *tree) {
	old := p.t
	for _, id := range p.leavesByPath() {
		n := &old.nodes[id]
		if nid, ok := nt.lookup(n.path); ok && nt.nodes[nid].leaf {
			continue
		}
		if n.alloc > 0 {
			p.releaseFrom(id, n.alloc, RuleConsumerRemoved)
		}
	}
	sh := make([]shares, len(nt.nodes))
	for _, id := range nt.leaves {
		nn := &nt.nodes[id]
		oid, ok := old.lookup(nn.path)
		if !ok || !old.nodes[oid].leaf {
			continue
		}
		on := &old.nodes[oid]
		nn.demand, nn.eff, nn.alloc, nn.waitingSince = on.demand, on.eff, on.alloc, on.waitingSince
		nn.holdings = on.holdings
		sh[id].target = p.sh(oid).target
	}
	sumUp(nt)
	p.t, p.plan, p.hasPlan = nt, plan, true
	p.useShares(sh)
	p.sits.forgetTree()
	p.planDigest = digestPlan(true, plan)
	p.setPolicy(plan)
	p.unfileAll()
	p.recomputeAll()
}

// setPolicy resolves the plan's policy and rules version once, and notes
// the sequence from which the version holds when it changes.
func (p *Pool) setPolicy(plan events.Plan) {
	before := p.policy.Rules
	p.policy, p.mode = policyOf(plan), modeOf(plan)
	if p.policy.Rules != before {
		p.rulesSince = p.seq
	}
}
