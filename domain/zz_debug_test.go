package domain

import (
	"encoding/json"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
)

var dbgSeed = flag.Uint64("dbg.seed", 0, "")
var dbgSeq = flag.Int("dbg.seq", 0, "")
var dbgBF = flag.Bool("dbg.bf", false, "")

func (p *Pool) dbgDump() string {
	s := ""
	parts, _ := p.hostParts()
	for _, pt := range parts {
		o := "public"
		if pt.owner != noNode {
			o = p.t.nodes[pt.owner].path
		}
		s += fmt.Sprintf("  part %s %s %d (host free %d)\n", p.hosts[pt.host].name, o, pt.slots, p.hosts[pt.host].free())
	}
	for _, l := range p.t.sortedLeaves {
		n := &p.t.nodes[l]
		s += fmt.Sprintf("  leaf %s prio %d share %d rg %v lg %v lend %v alloc %d target %d demand %d eff %d:", n.path, n.priority, n.share, n.reclaimGrace, n.lendGrace, n.lend, n.alloc, p.sh(l).target, n.demand, n.eff)
		for _, h := range n.holdings {
			s += fmt.Sprintf(" %s=%d", p.hosts[h.host].name, h.slots)
		}
		s += "\n"
	}
	for id := 1; id < len(p.t.nodes); id++ {
		if n := &p.t.nodes[id]; !n.leaf {
			s += fmt.Sprintf("  parent %s share %d lend %v lg %v max %d\n", n.path, n.share, n.lend, n.lendGrace, n.maxCap)
		}
	}
	for _, st := range p.sittings(parts) {
		o := "public"
		if ow := parts[st.part].owner; ow != noNode {
			o = p.t.nodes[ow].path
		}
		s += fmt.Sprintf("  sit %s on %s/%s %d\n", p.t.nodes[st.leaf].path, p.hosts[parts[st.part].host].name, o, st.slots)
	}
	for _, tk := range p.layered.takes {
		ln := "own"
		if tk.lender != noNode {
			ln = p.t.nodes[tk.lender].path
		}
		s += fmt.Sprintf("  take pool %s leaf %s lender %s %d ent %d\n", p.t.nodes[tk.pool].path, p.t.nodes[tk.leaf].path, ln, tk.slots, tk.entitled)
	}
	for l, u := range p.layered.ownUse {
		if u > 0 {
			s += fmt.Sprintf("  ownUse %s %d\n", p.t.nodes[l].path, u)
		}
	}
	return s
}

func TestZZDebug(t *testing.T) {
	if *dbgSeed == 0 {
		t.Skip()
	}
	sc := gen.GenerateOwned(gen.NewRand(*dbgSeed), 40)
	p := NewPool("dbg", WithDevelopmentRules())
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	for _, ev := range sc.Events {
		at = at.Add(time.Second)
		if pc, ok := ev.(*events.PlanChange); ok {
			st := *pc
			st.Plan.Rules = 4
			if *dbgBF {
				yes, no := true, false
				pol := events.Policy{Reclaim: "share_ratio", Preemption: &yes, Balance: &no}
				pol.Enforcement, pol.ReclaimForPreference = st.Plan.Policy.Enforcement, st.Plan.Policy.ReclaimForPreference
				st.Plan.Policy = pol
			}
			ev = &st
		}
		js, _ := json.Marshal(ev)
		r, err := p.Apply(Event{Seq: seq + 1, Time: at, Payload: ev})
		if err != nil {
			continue
		}
		seq++
		t.Logf("seq %d %s %s", seq, ev.EventType(), js)
		for _, d := range r.Decisions {
			t.Logf("   %s %s from %s %s %d %s", d.Kind, d.Consumer, d.From, d.Host, d.Slots, d.Rule)
		}
		bad := false
		_ = bad
		for _, c := range p.Consumers() {
			if c.MaxSlots != nil && c.Allocated > *c.MaxSlots {
				t.Logf("VIOLATION %s %d > %d", c.Path, c.Allocated, *c.MaxSlots)
				bad = true
			}
		}
		if int(seq) == *dbgSeq {
			t.Logf("state:\n%s", p.dbgDump())
			for _, c := range p.Consumers() {
				if c.Leaf {
					cp := p.Clone()
					r, _ := cp.Apply(Event{Seq: seq + 1, Time: at, Payload: &events.Demand{Demands: map[string]int64{c.Path: c.Demand}}})
					for _, d := range r.Decisions {
						t.Logf("  NOOP %s %s from %s %s %d %s", d.Kind, d.Consumer, d.From, d.Host, d.Slots, d.Rule)
					}
					t.Logf("after noop:\n%s", cp.dbgDump())
					break
				}
			}
			return
		}
	}
}
