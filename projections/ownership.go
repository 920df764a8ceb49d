package projections

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/cluster-ledger/ledger/domain"
)

// Ownership in the projection (docs/rules.md#ownership, rules v3):
//
//   - ownership holds the current assignment, one row per (consumer,
//     host) owning slots; ownership_history the same as validity
//     intervals, opened and closed like allocation_history. The
//     assignment changes only on plan and host events (the own decisions
//     say so), where the projector compares it with the open intervals.
//   - consumer_state's owned, own_used, lent_out and sources. A leaf's
//     sources and an owner's used and lent-out slots follow from where
//     every slot of a host sits, so a decision on a host can change them
//     for consumers the event did not touch (another borrower's slots
//     shift from the public part to a lent part). In a pool with an
//     assignment the projector keeps the figures it last wrote and, after
//     an event that moved slots, rewrites the rows of the consumers whose
//     figures changed.

// ownKey is a (consumer, host) pair of the assignment.
type ownKey = [2]string

// ownCols are the ownership columns of a consumer_state row.
type ownCols struct {
	owned, used, lent int64
	sources           []domain.Source // nil for NULL
}

func ownColsOf(v *domain.ConsumerView) ownCols {
	return ownCols{owned: v.Owned, used: v.OwnUsed, lent: v.LentOut, sources: v.Sources}
}

func (c ownCols) equal(o ownCols) bool {
	return c.owned == o.owned && c.used == o.used && c.lent == o.lent &&
		(c.sources == nil) == (o.sources == nil) && slices.Equal(c.sources, o.sources)
}

// sourcesValue is the sources column's value: JSON, or nil for NULL.
func (c ownCols) sourcesValue() any {
	if c.sources == nil {
		return nil
	}
	b, err := json.Marshal(c.sources)
	if err != nil {
		panic("projections: sources always encode: " + err.Error())
	}
	return json.RawMessage(b)
}

// ownHistRow is an ownership_history row opened in the batch.
type ownHistRow struct {
	pool     string
	key      ownKey
	slots    int64
	fromSeq  uint64
	fromTime time.Time
	toSeq    *int64
	toTime   *time.Time
}

// ownCloseRows closes ownership_history rows opened in an earlier batch.
type ownCloseRows struct {
	pools, consumers, hosts []string
	froms, seqs             []int64
	times                   []time.Time
}

// assignment returns the pool's ownership assignment by (consumer, host).
func assignment(p *domain.Pool) map[ownKey]int64 {
	own := p.Ownership()
	m := make(map[ownKey]int64, len(own))
	for _, o := range own {
		m[ownKey{o.Consumer, o.Host}] = o.Slots
	}
	return m
}

// refreshOwnViews re-reads every consumer's ownership figures after a
// plan or host event (which touches every row anyway): whether the views
// carry ownership at all, and the figures to compare later events with
// when the pool holds an assignment.
func (ps *poolState) refreshOwnViews(views []domain.ConsumerView) {
	ps.ownViews, ps.ownCols = false, nil
	for i := range views {
		if views[i].Leaf && views[i].Sources != nil {
			ps.ownViews = true
			break
		}
	}
	if !ps.ownViews || len(ps.pool.Ownership()) == 0 {
		return
	}
	ps.ownCols = make(map[string]ownCols, len(views))
	for i := range views {
		ps.ownCols[views[i].Path] = ownColsOf(&views[i])
	}
}

// noteOwnership records what one applied event did to ownership: the
// intervals of the assignment it changed and the consumers whose
// ownership figures moved without the event touching them.
func (b *batch) noteOwnership(pb *poolBatch, name string, seq uint64, at time.Time, res FoldResult, ev *eventViews) {
	ps := pb.state
	if res.All || hasOwnDecision(res.Decisions) {
		b.assignmentChange(pb, name, seq, at)
	}
	if res.All {
		ps.refreshOwnViews(ev.loadAll())
		return
	}
	if ps.ownCols == nil || len(res.Decisions) == 0 {
		return // no assignment, or no slot moved: no figure changed
	}
	// Only the slots held on the hosts the decisions name moved: the
	// figures that can change are those of the leaves holding slots there
	// and of the consumers owning slots there.
	var paths []string
	for _, h := range decisionHosts(res.Decisions) {
		paths = append(paths, ps.pool.OnHost(h)...)
	}
	slices.Sort(paths)
	for _, path := range slices.Compact(paths) {
		v, ok := ev.get(path)
		if !ok {
			continue
		}
		if c := ownColsOf(&v); !c.equal(ps.ownCols[v.Path]) {
			ps.ownCols[v.Path] = c
			pb.touched[v.Path] = seq
		}
	}
}

// decisionHosts lists the hosts decisions name, sorted, once each.
func decisionHosts(ds []domain.Decision) []string {
	hs := make([]string, 0, len(ds))
	for _, d := range ds {
		if d.Host != "" {
			hs = append(hs, d.Host)
		}
	}
	slices.Sort(hs)
	return slices.Compact(hs)
}

func hasOwnDecision(ds []domain.Decision) bool {
	return slices.ContainsFunc(ds, func(d domain.Decision) bool { return d.Kind == domain.KindOwn })
}

// assignmentChange compares the assignment with the open ownership
// intervals and closes and opens those that changed.
func (b *batch) assignmentChange(pb *poolBatch, name string, seq uint64, at time.Time) {
	ps := pb.state
	cur := assignment(ps.pool)
	keys := make([]ownKey, 0, len(cur)+len(ps.ownOpen))
	for k := range cur {
		keys = append(keys, k)
	}
	for k := range ps.ownOpen {
		if _, ok := cur[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, cmpPair)
	for _, k := range keys {
		old, isOpen := ps.ownOpen[k]
		slots := cur[k]
		if old.slots == slots {
			continue
		}
		pb.ownPairs[k] = true
		if isOpen {
			b.closeOwnHistory(pb, name, k, old.from, seq, at)
			delete(ps.ownOpen, k)
		}
		if slots != 0 {
			pb.ownOpenHere[k] = len(b.ownHistory)
			b.ownHistory = append(b.ownHistory, ownHistRow{pool: name, key: k, slots: slots, fromSeq: seq, fromTime: at})
			ps.ownOpen[k] = openRow{slots: slots, from: seq}
		}
	}
}

func (b *batch) closeOwnHistory(pb *poolBatch, name string, k ownKey, from, seq uint64, at time.Time) {
	if i, ok := pb.ownOpenHere[k]; ok { // opened in this batch: not in the database yet
		s, t := int64(seq), at
		b.ownHistory[i].toSeq, b.ownHistory[i].toTime = &s, &t
		delete(pb.ownOpenHere, k)
		return
	}
	c := &b.ownCloses
	c.pools = append(c.pools, name)
	c.consumers = append(c.consumers, k[0])
	c.hosts = append(c.hosts, k[1])
	c.froms = append(c.froms, int64(from))
	c.seqs = append(c.seqs, int64(seq))
	c.times = append(c.times, at)
}

// dropOwnership removes a halted pool's ownership rows from the batch
// (dropPool).
func (b *batch) dropOwnership(name string) {
	b.ownHistory = slices.DeleteFunc(b.ownHistory, func(h ownHistRow) bool { return h.pool == name })
	c, keep := &b.ownCloses, otherPools(b.ownCloses.pools, name)
	c.pools, c.consumers, c.hosts = keepRows(c.pools, keep), keepRows(c.consumers, keep), keepRows(c.hosts, keep)
	c.froms, c.seqs, c.times = keepRows(c.froms, keep), keepRows(c.seqs, keep), keepRows(c.times, keep)
}

// reindexOwnOpen rebuilds the batch's indexes of open ownership rows
// after rows were removed (dropPool).
func (b *batch) reindexOwnOpen() {
	for _, pb := range b.pools {
		clear(pb.ownOpenHere)
	}
	for i, h := range b.ownHistory {
		if h.toSeq == nil {
			b.pools[h.pool].ownOpenHere[h.key] = i
		}
	}
}

// addOwnership writes the ownership rows of the pairs the batch changed,
// as they stand at its end.
func (f *finalRows) addOwnership(name string, pb *poolBatch) {
	if len(pb.ownPairs) == 0 {
		return
	}
	cur := assignment(pb.state.pool)
	for _, k := range slices.SortedFunc(maps.Keys(pb.ownPairs), cmpPair) {
		if n := cur[k]; n != 0 {
			appendCols(f.ownUp[:], name, k[0], k[1], n)
		} else {
			appendCols(f.ownDel[:], name, k[0], k[1])
		}
	}
}

// checkOwnOpen makes sure the open ownership_history intervals are the
// rebuilt assignment, since the projector closes them by key.
func checkOwnOpen(name string, ps *poolState) error {
	cur := assignment(ps.pool)
	for k, slots := range cur {
		if o, ok := ps.ownOpen[k]; !ok || o.slots != slots {
			return fatalf("pool %s: %s owns %d slots of %s at sequence %d but its open ownership_history row says %d (a projection made before migration 0006 lacks ownership: rebuild it with ledger replay --into)",
				name, k[0], slots, k[1], ps.lastSeq, o.slots)
		}
	}
	if len(cur) != len(ps.ownOpen) {
		return fatalf("pool %s: %d open ownership_history rows for %d owned (consumer, host) pairs", name, len(ps.ownOpen), len(cur))
	}
	return nil
}
