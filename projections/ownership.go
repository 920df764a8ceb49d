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
//     shift from the public part to a lent part). The engine names them
//     in the event's Result (OwnershipMoved, and Assignment for the
//     assignment): the projector rewrites their rows and compares
//     nothing.

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

// noteOwnership records what one applied event did to ownership, as its
// Result says: the intervals of the assignment rows it changed, and the
// consumers whose ownership figures moved without the event touching
// them.
func (b *batch) noteOwnership(pb *poolBatch, name string, seq uint64, at time.Time, res FoldResult) {
	for _, o := range res.Assignment {
		b.assignmentChange(pb, name, ownKey{o.Consumer, o.Host}, o.Slots, seq, at)
	}
	for _, path := range res.OwnershipMoved {
		pb.touched[path] = seq
	}
}

// assignmentChange closes the open ownership interval of k and opens one
// at its new slots (none when it owns nothing there any more).
func (b *batch) assignmentChange(pb *poolBatch, name string, k ownKey, slots int64, seq uint64, at time.Time) {
	ps := pb.state
	pb.ownPairs[k] = true
	if old, isOpen := ps.ownOpen[k]; isOpen {
		b.closeOwnHistory(pb, name, k, old.from, seq, at)
		delete(ps.ownOpen, k)
	}
	if slots != 0 {
		pb.ownOpenHere[k] = len(b.ownHistory)
		b.ownHistory = append(b.ownHistory, ownHistRow{pool: name, key: k, slots: slots, fromSeq: seq, fromTime: at})
		ps.ownOpen[k] = openRow{slots: slots, from: seq}
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
