package domain

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
)

// placeCase is a placement run: hosts (registration order), parts, the
// current holdings and the layered targets' case.
// testPlaceRules: share_ratio's rules, every owned host of preference 5.
var testPlaceRules = placeRules{grant: RuleShareRatioGrant, borrow: RuleShareRatioGrant, reclaim: RuleShareRatioReclaim,
	preference: func(int32, int32) int64 { return 5 }}

// holdersOf lists, by host, the leaves holdOn says hold slots there.
func holdersOf(tr *tree, hosts []host, holdOn func(l, h int32) Slots) [][]leafSlots {
	out := make([][]leafSlots, len(hosts))
	for h := range hosts {
		for _, l := range tr.sortedLeaves {
			if k := holdOn(l, int32(h)); k > 0 {
				out[h] = append(out[h], leafSlots{leaf: l, slots: k})
			}
		}
	}
	return out
}

type placeCase struct {
	layered  layeredCase
	hosts    []host
	parts    map[string]map[string]Slots // host -> owner path ("" public) -> slots
	holdings map[string]map[string]Slots // leaf -> host -> slots
}

func (pc placeCase) run(t *testing.T) (*tree, []placeMove) {
	t.Helper()
	tr, lt := pc.layered.run(t)
	return tr, placeOwned(tr, pc.hosts, pc.partList(t, tr), lt, holdersOf(tr, pc.hosts, pc.holdOn(tr)), testPlaceRules)
}

func (pc placeCase) partList(t *testing.T, tr *tree) []hostPart {
	var parts []hostPart
	for hi, h := range pc.hosts {
		for owner, k := range pc.parts[h.name] {
			o := noNode
			if owner != "" {
				id, ok := tr.lookup(owner)
				if !ok {
					t.Fatalf("part owner %s unknown", owner)
				}
				o = id
			}
			parts = append(parts, hostPart{host: int32(hi), owner: o, slots: k})
		}
	}
	return parts
}

func (pc placeCase) holdOn(tr *tree) func(l, h int32) Slots {
	return func(l, h int32) Slots { return pc.holdings[tr.nodes[l].path][pc.hosts[h].name] }
}

func fmtMoves(tr *tree, hosts []host, ms []placeMove) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%s %s", m.kind, tr.nodes[m.leaf].path)
		if m.from != noNode {
			fmt.Fprintf(&b, "<-%s", tr.nodes[m.from].path)
		}
		fmt.Fprintf(&b, " %s %d %s", hosts[m.host].name, m.slots, m.rule)
		if d := m.deadline(tr, time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)); d != nil {
			fmt.Fprintf(&b, " until %s", d.Format("15:04"))
		}
		b.WriteString("; ")
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// TestPlaceOwned follows the spec's worked example
// (scenarios-ownership/own-lend-return) slot by slot: A owns h1, B owns
// h2 (lend_grace 5m), h3 is public.
func TestPlaceOwned(t *testing.T) {
	two := layeredCase{parents: true, owned: map[string]Slots{"/A": 4, "/B": 4}, public: 4}
	two.plan = twoOwners()
	hosts := []host{{name: "h1", slots: 4, up: true}, {name: "h2", slots: 4, up: true}, {name: "h3", slots: 4, up: true}}
	parts := map[string]map[string]Slots{"h1": {"/A": 4}, "h2": {"/B": 4}, "h3": {"": 4}}
	with := func(demand map[string]Slots) layeredCase { c := two; c.demand = demand; return c }
	for _, tc := range []struct {
		name     string
		demand   map[string]Slots
		holdings map[string]map[string]Slots
		want     string
	}{
		{
			name:   "A alone uses its own, the public slots and B's lent slots",
			demand: map[string]Slots{"/A": 12},
			want:   "grant /A h1 4 own.use; grant /A h3 4 share_ratio.grant; lend /A<-/B h2 4 share_ratio.grant",
		},
		{
			name:     "B takes its host back from A, with its lend_grace",
			demand:   map[string]Slots{"/A": 12, "/B": 4},
			holdings: map[string]map[string]Slots{"/A": {"h1": 4, "h2": 4, "h3": 4}},
			want:     "return /B<-/A h2 4 own.return until 10:05",
		},
		{
			name:     "the public host split 3:1 is a share reclaim",
			demand:   map[string]Slots{"/A": 12, "/B": 8},
			holdings: map[string]map[string]Slots{"/A": {"h1": 4, "h3": 4}, "/B": {"h2": 4}},
			want:     "reclaim /B<-/A h3 1 share_ratio.reclaim until 10:00",
		},
		{
			name:     "nothing to change",
			demand:   map[string]Slots{"/A": 12, "/B": 8},
			holdings: map[string]map[string]Slots{"/A": {"h1": 4, "h3": 3}, "/B": {"h2": 4, "h3": 1}},
			want:     "",
		},
		{
			// A holds 2 on B's host and 2 public; B now wants 4 of its own
			// and A's own host is free: A moves onto its own host.
			name:     "a borrower gives the owner's slots back and moves to its own",
			demand:   map[string]Slots{"/A": 4, "/B": 4},
			holdings: map[string]map[string]Slots{"/A": {"h2": 2, "h3": 2}, "/B": {"h2": 2}},
			want:     "return /B<-/A h2 2 own.return until 10:05; release /A h3 2 release.moved; grant /A h1 4 own.use",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := placeCase{layered: with(tc.demand), hosts: hosts, parts: parts, holdings: tc.holdings}
			tr, ms := pc.run(t)
			if got := fmtMoves(tr, hosts, ms); got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestPlaceOwnedProperties places random layered targets on random hosts
// whose parts match the ownership totals, from random current holdings.
// Applied in order, the moves never take from a leaf more than it holds
// on the host nor overfill a host, and they end every leaf exactly at its
// layered target, each slot of a leaf's on a host that has a part it is
// due. The placement is deterministic.
func TestPlaceOwnedProperties(t *testing.T) {
	runs := 2000
	if testing.Short() {
		runs = 200
	}
	kinds := map[Kind]int{}
	for seed := range uint64(runs) {
		r := gen.NewRand(seed + 55000)
		rc, tr, lt := randomLayered(t, r)
		hosts, parts := randomParts(r, tr, rc)
		holdings := randomHoldings(r, tr, hosts)
		holdOn := func(l, h int32) Slots { return holdings[[2]int32{l, h}] }
		ms := placeOwned(tr, hosts, parts, lt, holdersOf(tr, hosts, holdOn), testPlaceRules)
		if again := placeOwned(tr, hosts, parts, lt, holdersOf(tr, hosts, holdOn), testPlaceRules); fmtMoves(tr, hosts, again) != fmtMoves(tr, hosts, ms) {
			t.Fatalf("seed %d: two runs differ", seed)
		}
		after := map[[2]int32]Slots{}
		for k, v := range holdings {
			after[k] = v
		}
		if msg := applyMoves(tr, hosts, ms, after); msg != "" {
			t.Fatalf("seed %d: %s\n%s", seed, msg, fmtMoves(tr, hosts, ms))
		}
		for _, l := range tr.leaves {
			total := Slots(0)
			for h := range hosts {
				total += after[[2]int32{l, int32(h)}]
			}
			if total != lt.target[l] {
				t.Fatalf("seed %d: %s ends with %d, target %d\n%s\n%s", seed, tr.nodes[l].path, total, lt.target[l], fmtLayered(tr, lt), fmtMoves(tr, hosts, ms))
			}
		}
		for _, m := range ms {
			kinds[m.kind]++
		}
	}
	for _, k := range []Kind{KindGrant, KindLend, KindReturn, KindReclaim, KindRelease} {
		if kinds[k] < runs/50 {
			t.Fatalf("too few %s moves in %d runs: %v", k, runs, kinds)
		}
	}
	t.Logf("%d runs: %v", runs, kinds)
}

// randomParts spreads each consumer's part (what it owns and its children
// do not) and the public slots over up to five hosts.
func randomParts(r *gen.Rand, tr *tree, rc randomCase) ([]host, []hostPart) {
	hosts := make([]host, 1+r.Intn(5))
	for i := range hosts {
		hosts[i] = host{name: fmt.Sprintf("h%d", i), up: true}
	}
	var parts []hostPart
	spread := func(owner int32, k Slots) {
		for k > 0 {
			h := int32(r.Intn(len(hosts)))
			n := 1 + Slots(r.Intn(int(k)))
			parts = append(parts, hostPart{host: h, owner: owner, slots: n})
			hosts[h].slots += n
			k -= n
		}
	}
	for id := 1; id < len(tr.nodes); id++ {
		k := rc.c.owned[tr.nodes[id].path]
		for _, ch := range tr.nodes[id].children {
			k -= rc.c.owned[tr.nodes[ch].path]
		}
		spread(int32(id), k)
	}
	spread(noNode, rc.c.public)
	return hosts, mergeParts(parts)
}

// mergeParts adds up the parts of one owner on one host.
func mergeParts(parts []hostPart) []hostPart {
	var out []hostPart
	for _, p := range parts {
		found := false
		for i := range out {
			if out[i].host == p.host && out[i].owner == p.owner {
				out[i].slots += p.slots
				found = true
			}
		}
		if !found {
			out = append(out, p)
		}
	}
	return out
}

// randomHoldings fills hosts with random leaves' slots, within capacity.
func randomHoldings(r *gen.Rand, tr *tree, hosts []host) map[[2]int32]Slots {
	out := map[[2]int32]Slots{}
	for h := range hosts {
		free := hosts[h].slots
		for free > 0 && r.Intn(3) > 0 {
			l := tr.leaves[r.Intn(len(tr.leaves))]
			n := 1 + Slots(r.Intn(int(free)))
			out[[2]int32{l, int32(h)}] += n
			free -= n
		}
	}
	return out
}

// applyMoves applies the moves in order, checking each against the
// holdings and host sizes.
func applyMoves(tr *tree, hosts []host, ms []placeMove, hold map[[2]int32]Slots) string {
	used := make([]Slots, len(hosts))
	for k, v := range hold {
		used[k[1]] += v
	}
	for i, m := range ms {
		if m.slots <= 0 {
			return fmt.Sprintf("move %d has %d slots", i, m.slots)
		}
		switch m.kind {
		case KindGrant, KindLend:
			hold[[2]int32{m.leaf, m.host}] += m.slots
			used[m.host] += m.slots
		case KindReclaim, KindReturn:
			if hold[[2]int32{m.from, m.host}] < m.slots {
				return fmt.Sprintf("move %d takes %d from %s on %s, which holds %d", i, m.slots, tr.nodes[m.from].path, hosts[m.host].name, hold[[2]int32{m.from, m.host}])
			}
			hold[[2]int32{m.from, m.host}] -= m.slots
			hold[[2]int32{m.leaf, m.host}] += m.slots
		case KindRelease:
			if hold[[2]int32{m.leaf, m.host}] < m.slots {
				return fmt.Sprintf("move %d releases %d of %s on %s, which holds %d", i, m.slots, tr.nodes[m.leaf].path, hosts[m.host].name, hold[[2]int32{m.leaf, m.host}])
			}
			hold[[2]int32{m.leaf, m.host}] -= m.slots
			used[m.host] -= m.slots
		default:
			return fmt.Sprintf("move %d has kind %s", i, m.kind)
		}
		if used[m.host] > hosts[m.host].slots {
			return fmt.Sprintf("move %d fills %s to %d of %d", i, hosts[m.host].name, used[m.host], hosts[m.host].slots)
		}
	}
	return ""
}

// TestPartsOf: the assignment's rows become host parts and totals. /D
// owns h1 whole (6) and 2 of h2; its child /D/x owns 2 of h1; /E/y's row
// on a down host is ignored.
func TestPartsOf(t *testing.T) {
	tr, err := buildTreeUnchecked(eventsPlan("/D/x", "/D/z", "/E/y"))
	if err != nil {
		t.Fatal(err)
	}
	hosts := []host{{name: "h1", slots: 6, up: true}, {name: "h2", slots: 4, up: true}, {name: "h3", slots: 5}}
	rows := []ownSlot{{"/D", "h1", 6}, {"/D", "h2", 2}, {"/D/x", "h1", 2}, {"/E", "h3", 5}, {"/E/y", "h3", 5}}
	parts, tot := partsOf(tr, hosts, resolveRows(tr, map[string]int32{"h1": 0, "h2": 1, "h3": 2}, rows))
	var got []string
	for _, p := range parts {
		owner := "public"
		if p.owner != noNode {
			owner = tr.nodes[p.owner].path
		}
		got = append(got, fmt.Sprintf("%s:%s=%d", hosts[p.host].name, owner, p.slots))
	}
	if g, w := strings.Join(got, " "), "h1:/D=4 h1:/D/x=2 h2:/D=2 h2:public=2"; g != w {
		t.Errorf("parts %s, want %s", g, w)
	}
	at := func(path string) Slots { id, _ := tr.lookup(path); return tot.owned[id] }
	pv := func(path string) Slots { id, _ := tr.lookup(path); return tot.private[id] }
	if at("/D") != 8 || at("/D/x") != 2 || pv("/D") != 6 || pv("/D/x") != 0 || at("/E") != 0 || tot.public != 2 {
		t.Errorf("totals: /D %d (private %d), /D/x %d, /E %d, public %d", at("/D"), pv("/D"), at("/D/x"), at("/E"), tot.public)
	}
}

func eventsPlan(paths ...string) events.Plan {
	var p events.Plan
	for _, path := range paths {
		p.Consumers = append(p.Consumers, events.Consumer{Path: path})
	}
	return p
}

// placeOwned computes the placement of every leaf. parts must list every
// up host's parts; holders lists, by host, the leaves holding slots there
// now, in path order.
func placeOwned(t *tree, hosts []host, parts []hostPart, lt layeredTargets, holders [][]leafSlots, rules placeRules) []placeMove {
	idx := newPartIndex(t, len(hosts), parts)
	pl := place(t, hosts, idx, lt.everyLeaf(t, idx, holders), rules, &placeBufs{})
	pl.release()
	return pl.moves
}
