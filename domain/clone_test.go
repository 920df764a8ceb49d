package domain_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/gen"
)

// TestCloneFoldsAsTheOriginal: on random logs without ownership (under
// every rules version), with ownership and with rules 4's fields, a clone
// taken after any event is the pool restored from its snapshot (the same
// snapshot and state hash), folds every later event exactly as the
// original does (the same Result, refusal, state hash, views and
// snapshot after each), and folding the clone to the end of the log
// leaves the original untouched.
func TestCloneFoldsAsTheOriginal(t *testing.T) {
	type kind struct {
		name string
		opts []domain.PoolOption
		gen  func(seed uint64) gen.Scenario
		// restoredOnly: the clone is compared with the pool restored
		// from the snapshot, not with the original. Under rules 4 in
		// development a pool restored from its snapshot (a projector's
		// restart) does not yet fold every event as the live pool: with
		// floors, the live pool's Result names consumers whose targets
		// the restored one computed afresh (Changed differs, the state
		// does not). Clone is Restore without the encoding, so it shares
		// that, and the released versions are held to the original.
		restoredOnly bool
	}
	kinds := []kind{{name: "owned", gen: func(seed uint64) gen.Scenario { return gen.GenerateOwned(gen.NewRand(seed), 120) }},
		{name: "yarn", opts: []domain.PoolOption{domain.WithDevelopmentRules()}, restoredOnly: true,
			gen: func(seed uint64) gen.Scenario { return gen.GenerateYARN(gen.NewRand(seed), 120) }}}
	for _, v := range domain.RulesVersions {
		kinds = append(kinds, kind{name: fmt.Sprintf("rules%d", v),
			gen: func(seed uint64) gen.Scenario { return gen.Generate(gen.NewRand(seed), 120).UnderRules(int(v)) }})
	}
	seeds := uint64(8)
	if testing.Short() {
		seeds = 3
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			clones, owned := 0, 0
			for seed := range seeds {
				c, o := checkClones(t, fmt.Sprintf("%s seed %d", k.name, seed), k.gen(seed), k.opts, !k.restoredOnly)
				clones, owned = clones+c, owned+o
			}
			if clones == 0 || (k.name == "owned" && owned == 0) {
				t.Fatalf("%d clones, %d of pools holding an ownership assignment: the test compared nothing", clones, owned)
			}
		})
	}
}

// checkClones folds sc, clones the pool every few events and compares
// each clone's fold of the rest with that of the pool restored from the
// snapshot and (withOriginal) with the original's. It returns how many
// clones it compared and how many of them held an ownership assignment.
func checkClones(t *testing.T, name string, sc gen.Scenario, opts []domain.PoolOption, withOriginal bool) (clones, owned int) {
	t.Helper()
	evs := make([]domain.Event, len(sc.Events))
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, p := range sc.Events {
		evs[i] = domain.Event{Seq: uint64(i + 1), Time: at.Add(time.Duration(i) * time.Second), Payload: p}
	}
	p := domain.NewPool("clone", opts...)
	var want []string // the clone's record of each later event, compared with the original's
	for i := 0; i <= len(evs); i++ {
		if i%7 == 0 || i == len(evs) {
			before, hash := p.Snapshot(), p.StateHash()
			c := p.Clone()
			r, err := domain.Restore(before, opts...)
			if err != nil {
				t.Fatalf("%s: restore at event %d: %v", name, i, err)
			}
			if !bytes.Equal(c.Snapshot(), before) || c.StateHash() != hash || r.StateHash() != hash {
				t.Fatalf("%s: the clone after event %d is not the pool restored from its snapshot", name, i)
			}
			// The clone folds the rest of the log; the pool restored from
			// the snapshot must fold it alike, and the original must not
			// move.
			got := make([]string, 0, len(evs)-i)
			for _, ev := range evs[i:] {
				rec := record(c, ev)
				if rr := record(r, ev); rr != rec {
					t.Fatalf("%s: cloned at event %d, event %d: the clone folds\n%s\nthe restored pool\n%s", name, i, ev.Seq, rec, rr)
				}
				got = append(got, rec)
			}
			if !bytes.Equal(p.Snapshot(), before) || p.StateHash() != hash {
				t.Fatalf("%s: folding the clone taken at event %d changed the original", name, i)
			}
			want = got
			clones++
			if p.HasOwnership() {
				owned++
			}
		}
		if i == len(evs) {
			break
		}
		if rec := record(p, evs[i]); withOriginal && rec != want[0] {
			t.Fatalf("%s: event %d: the original folds\n%s\nthe clone\n%s", name, evs[i].Seq, rec, want[0])
		}
		want = want[1:]
	}
	return clones, owned
}

// record folds ev into p and says everything it did and everything the
// pool shows after it, as text.
func record(p *domain.Pool, ev domain.Event) string {
	res, err := p.Apply(ev)
	if err != nil {
		p.Skip(ev.Seq, ev.Time)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, v := range []any{res, fmt.Sprint(err), p.StateHash(), p.Consumers(), p.Hosts(), p.Ownership(), p.Allocations(), p.Policy()} {
		if e := enc.Encode(v); e != nil {
			panic(e)
		}
	}
	b.Write(p.Snapshot())
	return b.String()
}
