package explain_test

import (
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/domain"
)

const ownDir = "../../internal/scenario/testdata/ownership/"

// Ownership is rules version 3: these stories fold under it.

func ownStory(t *testing.T, file, consumer string) string {
	t.Helper()
	return fold(t, file, consumer, 0, domain.RulesV3)
}

// TestOwnershipStoryOfTheIssue is the story issue 10 asks for: /ml owns
// gpu-07 (rank 2 among its siblings, preference 9), lent 6 of its slots
// to /web while idle, then asked for 8 and took them back with a
// deadline of its 5-minute lend grace.
func TestOwnershipStoryOfTheIssue(t *testing.T) {
	out := fold(t, ownDir+"ml-lends-gpu.yaml", "/ml", 6, domain.RulesV3)
	requireAll(t, out,
		"owns 8 slots (used by itself: 8, lent out: 0)",
		"/ml owns 8 slots on gpu-07 (rank 2, preference 9); it was assigned 8 slots of it at seq 2; "+
			"6 were lent to /web through /'s public pool at seq 5 while /ml was idle; "+
			"at seq 6 /ml asked for 8 and took 6 back (return from /web, deadline 00:05:05, /ml's lend grace 5m)",
		"its slots come from: its own slots 8",
		// own.assign
		"/ml was assigned the ownership of 8 slots on gpu-07 [own.assign]: its plan gives it all of host gpu-07 (preference 9); ownership is assigned from the up hosts",
		// lend, told from the owner's side
		"6 of /ml's owned slots on gpu-07 were lent to /web [share_ratio.grant, lend]: /ml did not need them (demand 0, none of its 8 owned slots in use), so they went to /web through /'s public pool",
		"its lend grace gives the borrower 5m to give them up",
		// return
		"/ml took 6 slots back from /web on gpu-07 [own.return, return]: /ml asked for 8 and these slots are its own; an owner takes its lent slots back before any share rule applies (even with preemption false), deadline 00:05:05, /ml's lend grace 5m",
		// own.use
		"/ml used 2 slots it owns on gpu-07 [own.use]: a leaf uses its own slots first, min(effective demand 8, owned 8)",
	)
}

// TestOwnershipStoryTrimAndDrop: gpu-07 goes down (own.trim), comes back
// (own.assign), then a plan no longer gives it to /ml (own.drop).
func TestOwnershipStoryTrimAndDrop(t *testing.T) {
	out := ownStory(t, ownDir+"ml-lends-gpu.yaml", "/ml")
	requireAll(t, out,
		"/ml lost the ownership of 8 slots on gpu-07 [own.trim]: the host went down; it owns 0 slots there now",
		"at seq 7 it lost the ownership of 8 slots of it (own.trim: the host went down)",
		"/ml no longer owns 8 slots on gpu-07 [own.drop]: the plan no longer gives them to it; it owns 0 slots there now",
		"at seq 9 the plan stopped giving it 8 slots of it (own.drop)",
		"/ml owns nothing on gpu-07 now",
		"its slots come from: /'s public pool 6",
	)
}

// TestOwnershipStoryOfTheBorrower tells lend and return from /web's side,
// and where its slots come from (lent by /ops into the public pool).
func TestOwnershipStoryOfTheBorrower(t *testing.T) {
	out := ownStory(t, ownDir+"ml-lends-gpu.yaml", "/web")
	requireAll(t, out,
		"/web borrowed 6 slots owned by /ml on gpu-07 [share_ratio.grant, lend]: /ml did not need them",
		"/web borrowed 2 slots owned by /ops on gpu-09 [share_ratio.grant, lend]",
		"/web gave 6 slots on gpu-07 back to /ml [own.return, return]: /ml asked for 8",
		"deadline 00:05:05, /ml's lend grace 5m",
		"its slots come from: /'s public pool 4, /'s public pool (lent by /ops) 2",
	)
	if want := "owns "; containsLine(out, "  "+want) {
		t.Errorf("/web owns nothing, but its story says it does:\n%s", out)
	}
}

// TestOwnershipStoryOfTheWorkedExample is the ownership worked example
// (docs/rules.md#ownership-example)
// (own-lend-return.yaml, unchanged): /B's h2 lent to /A, then taken back.
func TestOwnershipStoryOfTheWorkedExample(t *testing.T) {
	out := ownStory(t, ownDir+"own-lend-return.yaml", "/B")
	requireAll(t, out,
		"/B owns 4 slots on h2 (rank 2, preference 5); it was assigned 4 slots of it at seq 3; "+
			"4 were lent to /A through /'s public pool at seq 5 while /B was idle; "+
			"at seq 6 /B asked for 4 and took 4 back (return from /A, deadline 00:00:05, /B's lend grace 0s)",
		"its slots come from: /'s public pool 1, its own slots 4",
	)
	out = ownStory(t, ownDir+"own-lend-return.yaml", "/A")
	requireAll(t, out,
		"/A used 4 slots it owns on h1 [own.use]",
		"/A borrowed 4 slots owned by /B on h2 [share_ratio.grant, lend]",
		"/A gave 4 slots on h2 back to /B [own.return, return]",
		"/A owns 4 slots on h1 (rank 1, preference 5)",
	)
}

// TestOwnershipStoryPrivatePool: a child's owned slots lent to its
// sibling and returned with the child's lend grace; the sibling's slots
// come from its parent's private pool.
func TestOwnershipStoryPrivatePool(t *testing.T) {
	out := ownStory(t, ownDir+"private-pool.yaml", "/ml/train")
	requireAll(t, out,
		"/ml/train was assigned the ownership of 2 slots on g1 [own.assign]: its plan gives it 2 slots of host g1 (preference 5); ownership is assigned from /ml's owned slots",
		"at seq 6 /ml/train asked for 2 and took 2 back (return from /ml/infer, deadline 00:02:05, /ml/train's lend grace 2m)",
	)
	out = ownStory(t, ownDir+"private-pool.yaml", "/ml/infer")
	requireAll(t, out,
		"/ml/infer gave 2 slots on g1 back to /ml/train [own.return, return]",
		"its slots come from: /'s public pool 2, /ml's private pool 2",
	)
	out = ownStory(t, ownDir+"private-pool.yaml", "/ml")
	requireAll(t, out,
		"owns 4 slots (used by itself and its subtree: 4, lent out: 0)",
		"its plan gives it 4 slots of group gpu (preference 5)",
		"/ml owns 4 slots on g1 (rank 1, preference 5)",
	)
}

// TestOwnershipStoryMoved: the owner's host comes up and its slots move
// there from the public pool (release.moved, then own.use).
func TestOwnershipStoryMoved(t *testing.T) {
	out := ownStory(t, ownDir+"moved.yaml", "/ml")
	requireAll(t, out,
		"/ml released 2 slots on c1 [release.moved]: the layer these slots came from is now served on other hosts",
		"so they moved: /ml gained 2 on g7 [own.use] in the same event",
		"/ml used 2 slots it owns on g7 [own.use]",
	)
}

func containsLine(out, prefix string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
