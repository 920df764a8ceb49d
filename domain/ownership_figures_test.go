package domain

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/gen"
)

// TestResultNamesEveryOwnershipChange: after every event of random logs
// with ownership (every policy and enforcement), the Result names
// exactly the consumers whose ownership figures moved (a consumer
// OwnershipMoved names moved, and every consumer whose view's figures
// differ from before the event is named, or touched, or the event was a
// plan or host event), and Assignment is exactly the difference of the
// assignment. A second pool folds the same log without anyone reading
// its views between events, as the projector now does: its Results are
// the same, and so are those of a pool restored from a snapshot every
// few events, as the projector rebuilds one (its sittings start unknown).
func TestResultNamesEveryOwnershipChange(t *testing.T) {
	runs := 300
	if testing.Short() {
		runs = 60
	}
	named, events := 0, 0
	for seed := range uint64(runs) {
		sc := gen.GenerateOwned(gen.NewRand(seed+57000), 40)
		watched, blind := NewPool("figures"), NewPool("figures")
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		seq := uint64(0)
		before := viewsByPath(watched)
		own := watched.Ownership()
		for i, ev := range sc.Events {
			at = at.Add(time.Second)
			r, err := watched.Apply(Event{Seq: seq + 1, Time: at, Payload: ev})
			rb, errb := blind.Apply(Event{Seq: seq + 1, Time: at, Payload: ev})
			if (err == nil) != (errb == nil) {
				t.Fatalf("seed %d event %d: watched %v, blind %v", seed, i, err, errb)
			}
			if err != nil {
				continue
			}
			seq++
			events++
			if i%7 == 3 {
				var rerr error
				if blind, rerr = Restore(blind.Snapshot()); rerr != nil {
					t.Fatal(rerr)
				}
			}
			if !reflect.DeepEqual(r, rb) {
				t.Fatalf("seed %d event %d: a pool whose views are read between events gives\n%+v\nthe other\n%+v", seed, i, r, rb)
			}
			after := viewsByPath(watched)
			if !r.All {
				checkMovedNamed(t, seed, i, &r, before, after)
			}
			named += len(r.OwnershipMoved)
			ownAfter := watched.Ownership()
			if want := ownershipDiff(own, ownAfter); !slices.Equal(r.Assignment, want) {
				t.Fatalf("seed %d event %d: Assignment %v, the assignment changed by %v", seed, i, r.Assignment, want)
			}
			before, own = after, ownAfter
		}
	}
	if named == 0 {
		t.Fatal("no event moved a figure without touching its consumer: the test tests nothing")
	}
	t.Logf("%d events, %d consumers named in OwnershipMoved", events, named)
}

func viewsByPath(p *Pool) map[string]ConsumerView {
	m := map[string]ConsumerView{}
	for _, v := range p.Consumers() {
		m[v.Path] = v
	}
	return m
}

func checkMovedNamed(t *testing.T, seed uint64, i int, r *Result, before, after map[string]ConsumerView) {
	t.Helper()
	touched := map[string]bool{}
	for _, c := range r.Changed {
		touched[c.Path] = true
	}
	for _, path := range r.OwnershipMoved {
		if ownFiguresEqual(before[path], after[path]) {
			t.Fatalf("seed %d event %d: %s is named in OwnershipMoved but its figures stayed %+v", seed, i, path, after[path])
		}
	}
	for path, v := range after {
		if !ownFiguresEqual(before[path], v) && !slices.Contains(r.OwnershipMoved, path) {
			t.Fatalf("seed %d event %d: %s's figures moved from %+v to %+v and the Result does not name it (touched: %v)",
				seed, i, path, before[path], v, touched[path])
		}
	}
}

func ownFiguresEqual(a, b ConsumerView) bool {
	return a.Owned == b.Owned && a.OwnUsed == b.OwnUsed && a.LentOut == b.LentOut && slices.Equal(a.Sources, b.Sources)
}

// ownershipDiff is what changed between two assignments, as
// Result.Assignment lists it.
func ownershipDiff(before, after []OwnedSlots) []OwnedSlots {
	old := map[[2]string]int64{}
	for _, o := range before {
		old[[2]string{o.Consumer, o.Host}] = o.Slots
	}
	var out []OwnedSlots
	seen := map[[2]string]bool{}
	for _, o := range after {
		k := [2]string{o.Consumer, o.Host}
		seen[k] = true
		if old[k] != o.Slots {
			out = append(out, o)
		}
	}
	for _, o := range before {
		if !seen[[2]string{o.Consumer, o.Host}] {
			out = append(out, OwnedSlots{Consumer: o.Consumer, Host: o.Host})
		}
	}
	slices.SortFunc(out, func(a, b OwnedSlots) int {
		if a.Consumer != b.Consumer {
			return compareStrings(a.Consumer, b.Consumer)
		}
		return compareStrings(a.Host, b.Host)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
