package projections

import (
	"container/list"
	"encoding/json"
	"math"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// poolState is the projector's in-memory view of one pool, always equal
// to what PostgreSQL holds once the current batch commits.
type poolState struct {
	pool      *domain.Pool
	chain     domain.Hash        // link after lastSeq
	lastSeq   uint64             // last stream sequence of the pool folded
	sinceSnap int                // events folded since the last snapshot
	costSnap  int64              // their work (foldCost) since the last snapshot
	sinceSave int                // events folded since the state was last stored (snapshot or saved_states)
	lru       *list.Element      // its place among the resident pools (resident.go)
	open      map[string]openRow // consumers with an open allocation_history row
	ids       *IDs               // ids of the events the pool applied
	halted    bool               // its fold failed: skipped until rebuilt

	// Ownership (projections/ownership.go): the open ownership_history rows by
	// (consumer, host).
	ownOpen map[ownKey]openRow
}

// openRow is a consumer's current allocation_history interval: its slots
// and its key (valid_from_seq), so closing it is a primary-key update.
type openRow struct {
	slots int64
	from  uint64
}

func newPoolState(p *domain.Pool, chain domain.Hash) *poolState {
	return &poolState{pool: p, chain: chain, lastSeq: p.Seq(), open: map[string]openRow{}, ids: NewIDs(), ownOpen: map[ownKey]openRow{}}
}

// batch collects the rows of a run of consecutive stream messages.
type batch struct {
	from, to uint64 // committed sequence before the batch, last sequence in it
	// catchUp: the batch brings one halted pool's rows up to the committed
	// offset (resumeHalted): written at the offset, which it leaves as it
	// is, and clearing the pool's halted_pools row.
	catchUp   bool
	events    [][]any
	decisions [][]any
	history   []histRow
	closes    closeRows
	// ownership_history rows opened and closed (projections/ownership.go)
	ownHistory []ownHistRow
	ownCloses  ownCloseRows
	snapshots  [][]any
	saved      [][]any // saved_states rows of the pools let go (resident.go)
	// pending_events rows of the messages set aside, and the keys of
	// those folded or dropped (fair.go)
	pending     [][]any
	pendingDone []pendingKey
	pools       map[string]*poolBatch
	halts       map[string]halt       // pools halted in this batch
	resumed     map[string]*poolState // catchUp: the halted pool it brings up to date

	figures []metrics.PoolFigures // totals of the pools after the batch, for metrics (metrics.go)
}

// poolBatch is what changed in one pool during the batch; its final rows
// are read from the pool at the end of the batch.
type poolBatch struct {
	state       *poolState
	lastSeq     uint64             // the pool's last event in this batch
	touched     map[string]uint64  // consumer -> last event that touched it
	pairs       map[[2]string]bool // (consumer, host) whose holding changed
	hosts       map[string]bool    // hosts whose row changed
	allHosts    bool               // a host event: every host row
	planChanged bool               // replace the pool's consumers rows
	openHere    map[string]int     // consumer -> index in batch.history of its open row
	ownPairs    map[ownKey]bool    // (consumer, host) whose ownership changed
	ownOpenHere map[ownKey]int     // (consumer, host) -> index in batch.ownHistory of its open row
}

type histRow struct {
	pool, consumer string
	slots          int64
	fromSeq        uint64
	fromTime       time.Time
	toSeq          *int64
	toTime         *time.Time
}

// closeRows closes history rows opened in an earlier batch.
type closeRows struct {
	pools, consumers []string
	froms, seqs      []int64
	times            []time.Time
}

func newBatch(committed uint64) *batch {
	return &batch{from: committed, to: committed, pools: map[string]*poolBatch{}}
}

func (b *batch) poolBatch(name string, ps *poolState) *poolBatch {
	pb := b.pools[name]
	if pb == nil {
		pb = &poolBatch{state: ps, touched: map[string]uint64{}, pairs: map[[2]string]bool{},
			hosts: map[string]bool{}, openHere: map[string]int{}, ownPairs: map[ownKey]bool{}, ownOpenHere: map[ownKey]int{}}
		b.pools[name] = pb
	}
	return pb
}

// add folds one event of pool name into ps and collects its rows. A
// halted pool's events are passed over; a failing fold halts the pool.
func (b *batch) add(name string, ps *poolState, st stream.Stored, msg storedMsg, snap snapshotRule, hook func(string, uint64)) error {
	if ps.halted {
		return nil
	}
	res, link, h, err := safeFold(ps, st, hook)
	if err != nil {
		return err
	}
	if h != nil {
		ps.halted = true
		b.dropPool(name)
		if b.halts == nil {
			b.halts = map[string]halt{}
		}
		b.halts[name] = *h
		return nil
	}
	pb := b.poolBatch(name, ps)
	b.events = append(b.events, eventRow(name, st, msg, &res, ps.chain, link))
	ps.chain, ps.lastSeq = link, st.Seq
	pb.lastSeq = st.Seq
	for _, d := range res.Decisions {
		b.decisions = append(b.decisions, decisionRow(name, d))
		pb.noteDecision(d)
	}
	if res.Refused == "" {
		b.noteState(pb, name, st, res)
	}
	if ps.noteFolded(res, snap) {
		b.snapshots = append(b.snapshots, snapshotRow(name, ps.pool))
	}
	return nil
}

// snapshotRule says when a pool's state is saved: after every events of
// its events, or as soon as the work of folding them again (foldCost)
// reaches cost, whichever comes first, so rebuilding any pool from its
// newest snapshot costs at most about cost, however large the pool.
type snapshotRule struct {
	events int
	cost   int64
}

// Units of foldCost: an event costs eventCost plus one unit per consumer
// and host state it produced and per decision it made. A unit is roughly
// what recomputing one consumer's view costs the engine and the projector
// (about a microsecond or two); eventCost stands for decoding the event,
// checking its signature and chaining it (tens of microseconds). The
// count is taken from the Result, so it is deterministic: the live
// projector, a rebuild and a resumed projector snapshot at the same
// events.
const eventCost = 50

// foldCost is the work of folding one event again, in the units above.
func foldCost(res FoldResult) int64 {
	return eventCost + int64(len(res.Changed)+len(res.Hosts)+len(res.Decisions))
}

// noteFolded counts one folded event towards the pool's next snapshot and
// reports whether it is due now (the counts then start again).
func (ps *poolState) noteFolded(res FoldResult, rule snapshotRule) bool {
	ps.sinceSnap++
	ps.costSnap += foldCost(res)
	ps.sinceSave++
	if ps.sinceSnap < rule.events && ps.costSnap < rule.cost {
		return false
	}
	ps.sinceSnap, ps.costSnap, ps.sinceSave = 0, 0, 0
	return true
}

func (pb *poolBatch) noteDecision(d domain.Decision) {
	if d.Kind == domain.KindOwn {
		return // ownership, not an allocation: noteOwnership
	}
	pb.pairs[[2]string{d.Consumer, d.Host}] = true
	if d.From != "" {
		pb.pairs[[2]string{d.From, d.Host}] = true
	}
	pb.hosts[d.Host] = true
}

// noteState records which consumers changed, the allocation history of
// those whose total moved and what the event did to ownership, from the
// event's Result alone.
func (b *batch) noteState(pb *poolBatch, name string, st stream.Stored, res FoldResult) {
	b.noteAllocations(pb, name, st, res)
	b.noteOwnership(pb, name, st.Seq, st.Envelope.Time, res)
}

func (b *batch) noteAllocations(pb *poolBatch, name string, st stream.Stored, res FoldResult) {
	seq, at := st.Seq, st.Envelope.Time
	if res.All {
		pb.allHosts = true
		if st.Envelope.Type == events.TypePlan {
			pb.planChanged = true
		}
	}
	for i := range res.Changed {
		c := &res.Changed[i]
		if c.Path == "/" {
			continue
		}
		pb.touched[c.Path] = seq
		if c.Leaf {
			b.historyChange(pb, name, c.Path, c.Allocated, seq, at)
		}
	}
	if !res.All {
		return
	}
	// Every consumer is in Changed: a leaf with an open interval that is
	// not a leaf any more was removed from the plan, or is now a parent.
	leaves := make(map[string]bool, len(res.Changed))
	for i := range res.Changed {
		if res.Changed[i].Leaf {
			leaves[res.Changed[i].Path] = true
		}
	}
	for _, path := range sortedKeys(pb.state.open) {
		if !leaves[path] {
			b.historyChange(pb, name, path, 0, seq, at)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// historyChange closes the leaf's open interval and opens one at the
// new amount when its total changed. Holding nothing is no interval, so
// allocations_as_of lists the consumers holding slots.
func (b *batch) historyChange(pb *poolBatch, name, path string, slots int64, seq uint64, at time.Time) {
	old, isOpen := pb.state.open[path]
	if old.slots == slots {
		return
	}
	if isOpen {
		b.closeHistory(pb, name, path, old.from, seq, at)
		delete(pb.state.open, path)
	}
	if slots != 0 {
		pb.openHere[path] = len(b.history)
		b.history = append(b.history, histRow{pool: name, consumer: path, slots: slots, fromSeq: seq, fromTime: at})
		pb.state.open[path] = openRow{slots: slots, from: seq}
	}
}

func (b *batch) closeHistory(pb *poolBatch, name, path string, from, seq uint64, at time.Time) {
	if i, ok := pb.openHere[path]; ok { // opened in this batch: not in the database yet
		s, t := int64(seq), at
		b.history[i].toSeq, b.history[i].toTime = &s, &t
		delete(pb.openHere, path)
		return
	}
	b.closes.pools = append(b.closes.pools, name)
	b.closes.consumers = append(b.closes.consumers, path)
	b.closes.froms = append(b.closes.froms, int64(from))
	b.closes.seqs = append(b.closes.seqs, int64(seq))
	b.closes.times = append(b.closes.times, at)
}

// storedMsg is what the events row keeps of the stream message besides
// its body: enough to store it again as it was (heal.go).
type storedMsg struct {
	subject string
	headers []byte // JSON of every header; nil when the message had none
}

func eventRow(pool string, st stream.Stored, msg storedMsg, res *FoldResult, prev, link domain.Hash) []any {
	e := st.Envelope
	var code, detail *string
	if res.Refused != "" {
		c := string(res.Refused)
		code, detail = &c, &res.RefusalDetail
	}
	v := int32(min(max(e.V, math.MinInt32), math.MaxInt32)) // refused when out of range; still stored
	// PostgreSQL keeps microseconds; time_ns keeps the rest (audit
	// verify compares the exact time).
	ns := int16(e.Time.Nanosecond() % 1000)
	return []any{pool, int64(st.Seq), e.ID, string(e.Type), v, e.Time, e.Producer, StorableJSON(e.Data), code, detail, prev[:], link[:],
		msg.subject, msg.headers, st.Raw, ns}
}

func decisionRow(pool string, d domain.Decision) []any {
	var from *string
	if d.From != "" {
		from = &d.From
	}
	return []any{pool, int64(d.Seq), d.Ordinal, string(d.Kind), d.Consumer, from, d.Host, d.Slots, string(d.Rule), d.Deadline}
}

func snapshotRow(pool string, p *domain.Pool) []any {
	h := p.StateHash() // the same hash as the checkpoint at this sequence
	return []any{pool, int64(p.Seq()), domain.SnapshotFormat, p.Snapshot(), h[:]}
}

// StorableJSON is what the events table keeps of an event's data: data
// itself unless jsonb would reject it (a \u0000
// escape), then the data as a JSON string.
func StorableJSON(data []byte) []byte {
	if len(data) == 0 {
		return []byte("null")
	}
	for i := 0; i+6 <= len(data); i++ {
		if data[i] == '\\' && string(data[i:i+6]) == `\u0000` {
			return jsonString(data)
		}
	}
	return data
}

// headersJSON encodes a message's headers for events.headers, keys in
// order (encoding/json sorts them), or nil for none.
func headersJSON(h nats.Header) []byte {
	if len(h) == 0 {
		return nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil // a map of strings always encodes
	}
	return b
}
