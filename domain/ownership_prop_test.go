package domain

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/events"
)

// randOwnInput draws a consumer tree (up to 3 levels, some parents
// implied), up hosts in three groups, and own entries of every form,
// some naming hosts that are not up.
func randOwnInput(r *rand.Rand) ownInput {
	var in ownInput
	nh := 1 + r.IntN(12)
	for i := range nh {
		in.hosts = append(in.hosts, ownHost{name: fmt.Sprintf("h%02d", i), group: fmt.Sprintf("g%d", r.IntN(3)),
			slots: Slots(1 + r.IntN(8)), workload: Slots(r.IntN(10))})
	}
	entries := func() []events.OwnEntry {
		var es []events.OwnEntry
		used := map[string]bool{}
		for range r.IntN(4) {
			var e events.OwnEntry
			switch r.IntN(3) {
			case 0, 1:
				e.Host = fmt.Sprintf("h%02d", r.IntN(nh+2)) // h(nh), h(nh+1) are never up
				if used[e.Host] {
					continue
				}
				used[e.Host] = true
				if r.IntN(2) == 0 {
					n := int64(1 + r.IntN(8))
					e.Slots = &n
				}
			default:
				e.Group = fmt.Sprintf("g%d", r.IntN(3))
				n := int64(1 + r.IntN(16))
				e.Slots = &n
			}
			if r.IntN(2) == 0 {
				p := int64(1 + r.IntN(10))
				e.Preference = &p
			}
			es = append(es, e)
		}
		return es
	}
	var add func(prefix string, depth int)
	add = func(prefix string, depth int) {
		for i := range 1 + r.IntN(4) {
			path := fmt.Sprintf("%s/c%d", prefix, i)
			if depth > 0 && r.IntN(8) == 0 {
				add(path, depth-1) // an implied parent: not in the input
				continue
			}
			in.consumers = append(in.consumers, ownConsumer{path: path, priority: int64(r.IntN(3)), own: entries()})
			if depth > 0 && r.IntN(2) == 0 {
				add(path, depth-1)
			}
		}
	}
	add("", 2)
	return in
}

// mutate changes an input the way events do: a host goes down or comes
// up (maybe in another group), a plan changes priorities or entries,
// workloads move.
func mutate(r *rand.Rand, in ownInput) ownInput {
	out := ownInput{consumers: slices.Clone(in.consumers), hosts: slices.Clone(in.hosts)}
	for range 1 + r.IntN(3) {
		switch r.IntN(4) {
		case 0:
			if len(out.hosts) > 1 {
				i := r.IntN(len(out.hosts))
				out.hosts = slices.Delete(out.hosts, i, i+1)
			}
		case 1:
			out.hosts = append(out.hosts, ownHost{name: fmt.Sprintf("h%02d", 20+r.IntN(10)), group: fmt.Sprintf("g%d", r.IntN(3)), slots: Slots(1 + r.IntN(8))})
			slices.SortFunc(out.hosts, func(x, y ownHost) int { return strings.Compare(x.name, y.name) })
			out.hosts = slices.CompactFunc(out.hosts, func(x, y ownHost) bool { return x.name == y.name })
		case 2:
			if len(out.consumers) > 0 {
				i := r.IntN(len(out.consumers))
				out.consumers[i].priority = int64(r.IntN(3))
			}
		default:
			for i := range out.hosts {
				out.hosts[i].workload = Slots(r.IntN(10))
			}
		}
	}
	return out
}

// encodeOwn renders a result byte for byte.
func encodeOwn(res ownResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%s\npublic %d\n", fmtRows(res.assignment), fmtDecisions(res.decisions), res.public)
	for _, o := range res.consumerOutcomes() {
		fmt.Fprintf(&b, "%s owned %d short %d private %d missing %v\n", o.path, o.owned, o.short, o.private, o.missing)
	}
	return b.String()
}

// TestOwnershipProperties checks, on random trees, hosts and histories:
// children own within their parents, per-host sums stay within the host,
// an owner holds only what an entry of it covers, owned + short is what
// its entries name, the decisions turn the previous assignment into the
// new one, the same input in any order gives the same bytes, and a re-run
// with its own output as the previous assignment changes nothing.
func TestOwnershipProperties(t *testing.T) {
	runs := 3000
	if testing.Short() {
		runs = 300
	}
	for seed := range runs {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		in := randOwnInput(r)
		first := assignOwnership(in)
		next := mutate(r, in)
		next.previous = first.assignment
		if r.IntN(4) == 0 { // and some rows of consumers and hosts that are gone
			next.previous = append(next.previous, ownSlot{"/gone", "h00", 3}, ownSlot{"/c0", "h99", 2})
		}
		res := assignOwnership(next)
		if msg := checkOwnProperties(next, res); msg != "" {
			t.Fatalf("seed %d: %s\n%s", seed, msg, encodeOwn(res))
		}
		shuffled := ownInput{consumers: slices.Clone(next.consumers), hosts: slices.Clone(next.hosts), previous: slices.Clone(next.previous)}
		r.Shuffle(len(shuffled.consumers), func(i, j int) {
			shuffled.consumers[i], shuffled.consumers[j] = shuffled.consumers[j], shuffled.consumers[i]
		})
		r.Shuffle(len(shuffled.hosts), func(i, j int) { shuffled.hosts[i], shuffled.hosts[j] = shuffled.hosts[j], shuffled.hosts[i] })
		r.Shuffle(len(shuffled.previous), func(i, j int) {
			shuffled.previous[i], shuffled.previous[j] = shuffled.previous[j], shuffled.previous[i]
		})
		if a, b := encodeOwn(res), encodeOwn(assignOwnership(shuffled)); a != b {
			t.Fatalf("seed %d: the input's order changed the result:\n%s\nvs\n%s", seed, a, b)
		}
		again := next
		again.previous = res.assignment
		res2 := assignOwnership(again)
		if fmtRows(res2.assignment) != fmtRows(res.assignment) || len(res2.decisions) != 0 {
			t.Fatalf("seed %d: not idempotent:\n%s\nthen\n%s", seed, encodeOwn(res), encodeOwn(res2))
		}
	}
}

func checkOwnProperties(in ownInput, res ownResult) string {
	hostOf := map[string]ownHost{}
	for _, h := range in.hosts {
		hostOf[h.name] = h
	}
	byCons := map[string]map[string]Slots{}
	for _, row := range res.assignment {
		if row.slots <= 0 {
			return fmt.Sprintf("row %v is not positive", row)
		}
		if byCons[row.consumer] == nil {
			byCons[row.consumer] = map[string]Slots{}
		}
		byCons[row.consumer][row.host] += row.slots
	}
	top := map[string]Slots{}
	kids := map[string]map[string]Slots{} // parent -> host -> children's sum
	for _, c := range in.consumers {
		mine := byCons[c.path]
		parent := parentPath(c.path)
		for h, n := range mine {
			host, up := hostOf[h]
			if !up {
				return fmt.Sprintf("%s owns %d on %s, which is not up", c.path, n, h)
			}
			covered := false
			for _, e := range c.own {
				covered = covered || e.Host == h || (e.Host == "" && e.Group == host.group)
			}
			if !covered {
				return fmt.Sprintf("%s owns %d on %s, which none of its entries covers", c.path, n, h)
			}
			if parent == "/" {
				top[h] += n
			} else {
				if kids[parent] == nil {
					kids[parent] = map[string]Slots{}
				}
				kids[parent][h] += n
			}
		}
		var want, owned Slots
		for _, e := range c.own {
			switch host, up := hostOf[e.Host]; {
			case e.WholeHost() && up:
				want += host.slots
			case e.WholeHost():
			default:
				want += Slots(*e.Slots)
			}
		}
		for _, n := range mine {
			owned += n
		}
		for _, o := range res.consumerOutcomes() {
			if o.path == c.path && (o.owned != owned || o.owned+o.short != want) {
				return fmt.Sprintf("%s owns %d (reported %d), short %d, its entries name %d", c.path, owned, o.owned, o.short, want)
			}
		}
	}
	var topSum, total Slots
	for h, n := range top {
		if n > hostOf[h].slots {
			return fmt.Sprintf("top-level consumers own %d of %s's %d slots", n, h, hostOf[h].slots)
		}
		topSum += n
	}
	for _, h := range in.hosts {
		total += h.slots
	}
	if res.public != total-topSum {
		return fmt.Sprintf("public pool %d, want %d", res.public, total-topSum)
	}
	for p, hs := range kids {
		for h, n := range hs {
			if n > byCons[p][h] {
				return fmt.Sprintf("the children of %s own %d on %s, the parent %d", p, n, h, byCons[p][h])
			}
		}
	}
	// The decisions turn the previous assignment into the new one.
	state := map[[2]string]Slots{}
	for _, row := range in.previous {
		state[[2]string{row.consumer, row.host}] += row.slots
	}
	for _, d := range res.decisions {
		k := [2]string{d.Consumer, d.Host}
		switch d.Rule {
		case RuleOwnAssign:
			state[k] += Slots(d.Slots)
		case RuleOwnDrop, RuleOwnTrim:
			state[k] -= Slots(d.Slots)
		default:
			return fmt.Sprintf("decision with rule %s", d.Rule)
		}
		if d.Kind != KindOwn || d.Slots <= 0 {
			return fmt.Sprintf("decision %+v", d)
		}
	}
	for k, n := range state {
		if n != byCons[k[0]][k[1]] {
			return fmt.Sprintf("the decisions leave %s with %d on %s, the assignment says %d", k[0], n, k[1], byCons[k[0]][k[1]])
		}
	}
	return ""
}
