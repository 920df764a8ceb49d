package audit

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/projections/query"
)

// finalState compares a pool's current tables with the replayed state:
// allocations per host, consumer state (ownership figures included), the
// ownership assignment and the checkpoint's hashes.
func (c *checker) finalState(ctx context.Context, name string, r *Replayer) error {
	pr, err := r.open(ctx, name)
	if err != nil {
		return err
	}
	p := pr.pool
	if err := c.allocations(ctx, name, p); err != nil {
		return err
	}
	if err := c.consumerState(ctx, name, p); err != nil {
		return err
	}
	if err := c.ownership(ctx, name, p); err != nil {
		return err
	}
	if err := c.consumerOwnership(ctx, name, p); err != nil {
		return err
	}
	cp, err := query.CheckpointOf(ctx, c.db, name)
	if err != nil {
		return &Divergence{Pool: name, What: "no checkpoint row", Expected: fmt.Sprintf("last_seq %d", p.Seq()), Found: err.Error()}
	}
	lastSeq, stateHash, chainHash := cp.LastSeq, cp.StateHash, cp.ChainHash
	sh := p.StateHash()
	switch {
	case lastSeq != p.Seq():
		return &Divergence{Pool: name, What: "checkpoint sequence", Expected: fmt.Sprint(p.Seq()), Found: fmt.Sprint(lastSeq)}
	case !bytes.Equal(chainHash, pr.chain[:]):
		return &Divergence{Pool: name, Seq: p.Seq(), What: "checkpoint chain hash", Expected: fmt.Sprintf("%x", pr.chain[:8]), Found: fmt.Sprintf("%x", chainHash[:min(8, len(chainHash))])}
	case !bytes.Equal(stateHash, sh[:]):
		return &Divergence{Pool: name, Seq: p.Seq(), What: "checkpoint state hash", Expected: fmt.Sprintf("%x", sh[:8]), Found: fmt.Sprintf("%x", stateHash[:min(8, len(stateHash))])}
	}
	return nil
}

func (c *checker) allocations(ctx context.Context, name string, p *domain.Pool) error {
	want := map[[2]string]int64{}
	for _, a := range p.Allocations() {
		want[[2]string{a.Consumer, a.Host}] = a.Slots
	}
	rows, err := query.HostAllocations(ctx, c.db, name)
	if err != nil {
		return err
	}
	found := map[[2]string]int64{}
	for _, r := range rows {
		if r.Slots != 0 { // a row holding nothing is no allocation
			found[[2]string{r.Consumer, r.Host}] = r.Slots
		}
	}
	for _, a := range p.Allocations() {
		k := [2]string{a.Consumer, a.Host}
		if found[k] != a.Slots {
			return c.allocationDivergence(name, k, a.Slots, found[k])
		}
	}
	for k, slots := range found {
		if _, ok := want[k]; !ok {
			return c.allocationDivergence(name, k, 0, slots)
		}
	}
	return nil
}

func (c *checker) allocationDivergence(pool string, k [2]string, want, got int64) *Divergence {
	return &Divergence{Pool: pool, Seq: c.lastChange[lastKey{pool, k[0], k[1]}],
		What:     fmt.Sprintf("allocation of %s on %s (the sequence is the last decision that changed it)", k[0], k[1]),
		Expected: fmt.Sprintf("%d slots", want), Found: fmt.Sprintf("%d slots", got)}
}

func (c *checker) consumerState(ctx context.Context, name string, p *domain.Pool) error {
	rows, err := query.ConsumerStates(ctx, c.db, name)
	if err != nil {
		return err
	}
	found := map[string][4]int64{}
	for _, r := range rows {
		found[r.Path] = [4]int64{r.Demand, r.Allocated, r.Target, r.Planned}
	}
	for _, cv := range p.Consumers() {
		want := [4]int64{cv.Demand, cv.Allocated, cv.Target, cv.Planned}
		if got, ok := found[cv.Path]; !ok || got != want {
			return &Divergence{Pool: name, What: "consumer_state of " + cv.Path + " (demand, allocated, target, planned)",
				Expected: fmt.Sprint(want), Found: fmt.Sprint(got)}
		}
	}
	if len(found) != len(p.Consumers()) {
		return &Divergence{Pool: name, What: "consumer_state rows", Expected: fmt.Sprint(len(p.Consumers())), Found: fmt.Sprint(len(found))}
	}
	return nil
}

type lastKey struct{ pool, consumer, host string }

// noteChanges remembers, per (consumer, host), the last event that changed
// it, so a changed allocation row can be traced to a sequence.
func (c *checker) noteChanges(ev Event) {
	if c.lastChange == nil {
		c.lastChange = map[lastKey]uint64{}
	}
	for _, d := range ev.Result.Decisions {
		c.lastChange[lastKey{ev.Message.Pool, d.Consumer, d.Host}] = ev.Stored.Seq
		if d.From != "" {
			c.lastChange[lastKey{ev.Message.Pool, d.From, d.Host}] = ev.Stored.Seq
		}
	}
}

// ownership compares the ownership rows with the replayed assignment.
func (c *checker) ownership(ctx context.Context, name string, p *domain.Pool) error {
	rows, err := query.Ownership(ctx, c.db, name)
	if err != nil {
		return err
	}
	found := map[[2]string]int64{}
	for _, r := range rows {
		found[[2]string{r.Consumer, r.Host}] = r.Slots
	}
	want := p.Ownership()
	for _, o := range want {
		if got := found[[2]string{o.Consumer, o.Host}]; got != o.Slots {
			return &Divergence{Pool: name, What: fmt.Sprintf("ownership of %s on %s", o.Consumer, o.Host),
				Expected: fmt.Sprintf("%d slots", o.Slots), Found: fmt.Sprintf("%d slots", got)}
		}
		delete(found, [2]string{o.Consumer, o.Host})
	}
	for _, k := range slices.SortedFunc(maps.Keys(found), func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	}) {
		return &Divergence{Pool: name, What: fmt.Sprintf("ownership of %s on %s", k[0], k[1]),
			Expected: "0 slots (no row)", Found: fmt.Sprintf("%d slots", found[k])}
	}
	return nil
}

// consumerOwnership compares consumer_state's ownership columns (owned,
// own_used, lent_out, sources) with the replayed views.
func (c *checker) consumerOwnership(ctx context.Context, name string, p *domain.Pool) error {
	rows, err := query.ConsumerOwnerships(ctx, c.db, name)
	if err != nil {
		return err
	}
	found := map[string]query.ConsumerOwnership{}
	for _, r := range rows {
		found[r.Path] = r
	}
	for _, cv := range p.Consumers() {
		got := found[cv.Path]
		if want := [3]int64{cv.Owned, cv.OwnUsed, cv.LentOut}; [3]int64{got.Owned, got.OwnUsed, got.LentOut} != want {
			return &Divergence{Pool: name, What: "consumer_state of " + cv.Path + " (owned, own_used, lent_out)",
				Expected: fmt.Sprint(want), Found: fmt.Sprint([3]int64{got.Owned, got.OwnUsed, got.LentOut})}
		}
		if want, ok := sameSources(cv.Sources, got.Sources); !ok {
			return &Divergence{Pool: name, What: "consumer_state of " + cv.Path + " (sources)", Expected: want, Found: string(got.Sources)}
		}
	}
	return nil
}

// sameSources compares a view's sources with the stored JSON (NULL for
// nil), and returns the expected JSON for a report.
func sameSources(want []domain.Source, got json.RawMessage) (string, bool) {
	if want == nil {
		return "NULL", got == nil
	}
	b, _ := json.Marshal(want)
	if got == nil {
		return string(b), false
	}
	var g []domain.Source
	if err := json.Unmarshal(got, &g); err != nil {
		return string(b), false
	}
	return string(b), reflect.DeepEqual(append([]domain.Source{}, want...), append([]domain.Source{}, g...))
}
