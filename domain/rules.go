package domain

import (
	"fmt"

	"github.com/cluster-ledger/ledger/events"
)

// RulesVersion names one frozen behaviour of the fold
// (docs/rules.md#versions), the way pebble's format major versions name
// durable formats. A pool runs under one version at a time; it is part of the
// pool's state, snapshot and state hash. Once a version is released its
// behaviour never changes: the golden corpus (test/golden) holds the
// decisions and chain hashes each version gives a fixed set of logs.
//
// To change a rule: add a version below, give it its differences in
// behaviourOf, make it RulesNewest, and add its column to the golden
// corpus (go test ./test/golden -golden.add-version N). Never edit an
// existing version's behaviour.
type RulesVersion int

const (
	// RulesV1 is the behaviour first released: an event releases excess
	// (a > E) before it loses the slots on down hosts, so a host loss
	// that shrinks a percentage max can cost a consumer twice.
	RulesV1 RulesVersion = 1
	// RulesV2 loses the slots on down hosts first, then releases only
	// what is still above E (docs/rules.md#fold), and refuses a priority
	// beyond ±MaxPriority (version 1 ranked -2^63 as the highest).
	RulesV2 RulesVersion = 2
	// RulesV3 adds ownership, private pools, lending and returns
	// (docs/rules.md#ownership and the sections after it) to version 2. A
	// plan without ownership folds exactly as under version 2: versions 1 and
	// 2 refused every plan naming ownership (ownership_unsupported_rules), so
	// no log they accepted means anything else under version 3, and the
	// golden corpus holds every log without ownership to version 2's
	// decisions under version 3 (TestGoldenV3KeepsV2WithoutOwnership).
	RulesV3 RulesVersion = 3
	// RulesV4 adds three behaviours of the YARN Capacity Scheduler behind
	// new plan fields (docs/rules.md#version-4):
	// priority bands (policy priority_bands), consumers that are not
	// preempted (preemptable: false, inherited) and zero shares (share:
	// 0). A plan without them folds exactly as under version 3
	// (TestGoldenV4KeepsV3WithoutPartD). Rules 1 to 3 refuse the fields
	// as their builds did: malformed for the two fields, invalid_share for
	// a zero share.
	//
	// It is in development, not released: the engine folds it only in
	// pools made WithDevelopmentRules (ledger simulate
	// --rules-development, ledger dev --rules-development, tests); the
	// ledger never stamps it and refuses it at append, a projector without
	// the option stops on it, so no stored log holds it and its behaviour
	// may still change. With ownership it folds rulings 1-13
	// (docs/rules.md#version-4), each behind a flag of behaviour.
	RulesV4 RulesVersion = 4

	// RulesNewest is the version the ledger stamps on a plan that names
	// none: the newest released one.
	RulesNewest = RulesV3
	// RulesDevelopment is the version in development.
	RulesDevelopment = RulesV4
)

// RulesVersions lists every released version, oldest first.
var RulesVersions = []RulesVersion{RulesV1, RulesV2, RulesV3}

// Released reports whether this build implements v as a released version.
func (v RulesVersion) Released() bool { return v >= RulesV1 && v <= RulesNewest }

// folds reports whether a pool folds plans naming v: every released
// version, and the version in development where development allows it.
func (v RulesVersion) folds(development bool) bool {
	return v.Released() || (development && v == RulesDevelopment)
}

func (v RulesVersion) String() string { return fmt.Sprintf("rules v%d", int(v)) }

// RulesOf returns the version a stored plan names: a plan written before
// versions existed names none and means version 1.
func RulesOf(plan events.Plan) RulesVersion {
	if plan.Rules == 0 {
		return RulesV1
	}
	return RulesVersion(plan.Rules)
}

// behaviour is what distinguishes the versions, resolved once when a plan
// is applied so the fold never compares version numbers.
type behaviour struct {
	// trimFirst: lose the slots on down hosts before releasing excess.
	trimFirst bool
	// boundedPriority: refuse priorities beyond ±MaxPriority.
	boundedPriority bool
	// ownership: the plan may name ownership (docs/rules.md#ownership),
	// folded in layers (ownership_fold.go). Versions 1 and 2 refuse such plans
	// (ownership_unsupported_rules, ownership_plan.go).
	ownership bool
	// yarn: the plan may name version 4's fields (priority_bands,
	// preemptable, a zero share; tree.go, yarn.go). Versions 1 to 3 refuse
	// them as their builds did.
	yarn bool
	// moveGrace: a move's release (release.moved) carries the mover's
	// reclaim_grace as its deadline, as a reclaim's victim gets
	// (rules-v4 ruling 13; docs/rules.md#version-4).
	moveGrace bool
	// lendRevoked: slots a plan or host change leaves a leaf on a part it
	// may no longer hold, which it cannot be re-seated off and no return
	// takes, are released as release.lend_revoked with the part owner's
	// lend_grace (rules-v4 ruling 10), not as release.moved.
	lendRevoked bool
	// seatedReturns: an owner's gain on its part is paired as a return
	// only with the borrowers seated on that part at the start of the
	// rebalance, each up to what it sits there; the rest comes from free
	// slots (rules-v4 ruling 11).
	seatedReturns bool
	// priorityPerPool: under priority a pool with several lent-class
	// groups is divided once, G over all its slots, the classes only
	// restricting which slots a leaf takes (rules-v4 ruling 1,
	// priority_per_pool.go); before, each group apart.
	priorityPerPool bool
	// swapReturns: with reclaim_for_preference: false an owner uses the
	// slots its borrowers are given in the same event before taking its
	// lent slots back (rules-v4 ruling 9, return_swap.go); before, only
	// its own free parts.
	swapReturns bool
	// noMoveWithoutPreemption: with preemption false a leaf keeps every
	// slot it holds on a part it may hold but what a return takes, so
	// nothing is moved (rules-v4 ruling 7, ownership_placement.go
	// keepRest); before, work was moved to reach the division's parts.
	noMoveWithoutPreemption bool
	// countsOnTotals: share_ratio without preemption, with ownership,
	// decides counts on each leaf's total against the layered targets of
	// share_ratio with reclaim and balance (rules-v4 ruling 4,
	// fill_on_totals.go); before, pool by pool from what leaves sit on.
	countsOnTotals bool
	// seatByRounds: under priority the fold seats each pool's tier by
	// rounds with the pool's bounds as it reaches the pool, so the seating
	// reproduces the division (rules-v4 ruling 12, priority_seating.go,
	// docs/decisions.md #216);
	// before, every host was seated apart before the fold, priority first.
	seatByRounds bool
	// keepMore: the placement's step 1 keeps, along augmenting paths, what
	// its greedy pass leaves a holder although a seating keeping it exists
	// (ownership_keep_more.go; docs/decisions.md #217).
	keepMore bool
	// restrictiveFirst: the seating, the placement's step 1 and its
	// grants take a part lent in a class some leaf of the pool may not use
	// before the pool's own slots, as the pool's division does
	// (tree.restrictiveFor; docs/decisions.md #218); before, every lent
	// part came after the public part.
	restrictiveFirst bool
	// victimOwnLast: rules 4's T0 restore reclaims a victim's slots on its
	// own parts last, since the victim takes them back at the next event
	// (ruling 5; docs/decisions.md #246).
	victimOwnLast bool
	// foldToRest: with ownership, the event settles again until a settle
	// decides nothing (at most restPasses settles, settle.go), so the
	// state an event leaves is at rest (ruling 12's property;
	// docs/decisions.md #236).
	foldToRest bool
	// layerWhenOwning: the fold is layered only when some consumer owns
	// slots; before, whenever the plan named own, lend or
	// reclaim_for_preference (docs/decisions.md #322).
	layerWhenOwning bool
	// excessInReleaseOrder: a leaf sitting in a pool on more than the
	// demand it brings there (an owner's own slots took it above E, its
	// demand fell) gives that back in section 5's release order, slots
	// lent by others first, before the division's losses take the pool's
	// own slots first (rules-v4 ruling 5, keepSittings; docs/decisions.md
	// #331); before, every loss took the pool's own slots first (#106).
	excessInReleaseOrder bool
	// swapDues: the placement's last keep with preemption lets a holder
	// keep where it sits by swapping dues with a leaf due that part that
	// may hold the holder's other due parts, rather than moving it
	// (ownership_keep.go swapDues; docs/decisions.md #340).
	swapDues bool
	// returnsFromKeepers: under share_ratio with preemption an owner's
	// gain is a return from the borrower seated on its part though step 1
	// kept that borrower on the host, which then takes its slots from the
	// others (ownership_pairing.go returnFromKeepers; docs/decisions.md
	// #342).
	returnsFromKeepers bool
	// noIdleMoves: a move is made only when the slots it frees are taken
	// in the same event; a leaf is not moved off slots that would stay
	// free (idle_moves.go; docs/decisions.md #347).
	noIdleMoves bool
	// reclaimsUnderMax: a claimant's free grant its ancestors' max allows
	// only because a sibling's slot is released is a reclaim from that
	// sibling (capped_reclaims.go; docs/decisions.md #354).
	reclaimsUnderMax bool
	// excessByReleaseOrder: with preemption, the placement gives an
	// owner's excess above E back in section 5's release order (tiers,
	// then the host holding most of its slots), not where claimants go
	// first (ownership_excess.go; docs/decisions.md #356).
	excessByReleaseOrder bool
	// canonicalRows: with ownership, an event's rows are merged per (kind,
	// consumer, from, host, rule, deadline) and written in one canonical
	// order (canonical_rows.go; docs/decisions.md #377); before, in the
	// order the fold made them.
	canonicalRows bool
	// freeFirst: with ownership, the placement serves each claimant from
	// the slots free as it started before the slots others give up
	// (ownership_grants.go nextPart; docs/decisions.md #378); before, the
	// roomiest part, counting what others give up there.
	freeFirst bool
	// freeBeforeKeepers: an owner's gain on its part takes the part's free
	// slots before a return from a borrower step 1 kept on the host
	// (ownership_pairing.go returnFromKeepers; docs/decisions.md #379);
	// before, the seated borrowers first (#342).
	freeBeforeKeepers bool
	// freeByPart: the pairing gives a leaf a host's free slots from the
	// parts that had them first, so a free slot of a lent part is a lend
	// beside a reclaim (ownership_pairing.go pair; docs/decisions.md
	// #380); before, in the order the leaf's gains were placed.
	freeByPart bool
	// underLender: under priority a leaf under a class's lender may take
	// the class's slots in an upper pool whatever its reclaim_grace (an
	// ancestor's private slots lent upward; priority_per_pool.go mayUse;
	// docs/decisions.md #382); before, by grace alone.
	underLender bool
	// compensatedVictims: a leaf losing slots on one host for a claimant
	// and given as many on another in the same rebalance keeps its slots;
	// the claimant takes the compensation (compensated_victims.go;
	// docs/decisions.md #385, #401).
	compensatedVictims bool
	// excessWithoutPreemption: excessByReleaseOrder where step 1 keeps
	// what each holder sits on (ownership_keep.go; docs/decisions.md
	// #404); before, the excess went on the last hosts.
	excessWithoutPreemption bool
}

func behaviourOf(v RulesVersion) behaviour {
	return behaviour{trimFirst: v >= RulesV2, boundedPriority: v >= RulesV2, ownership: v >= RulesV3, yarn: v >= RulesV4,
		moveGrace: v >= RulesV4, lendRevoked: v >= RulesV4, seatedReturns: v >= RulesV4, priorityPerPool: v >= RulesV4,
		swapReturns: v >= RulesV4, noMoveWithoutPreemption: v >= RulesV4,
		countsOnTotals: v >= RulesV4, seatByRounds: v >= RulesV4, keepMore: v >= RulesV4, restrictiveFirst: v >= RulesV4, victimOwnLast: v >= RulesV4, foldToRest: v >= RulesV4,
		layerWhenOwning: v >= RulesV4, excessInReleaseOrder: v >= RulesV4, swapDues: v >= RulesV4, returnsFromKeepers: v >= RulesV4,
		noIdleMoves: v >= RulesV4, reclaimsUnderMax: v >= RulesV4,
		excessByReleaseOrder: v >= RulesV4, canonicalRows: v >= RulesV4, freeFirst: v >= RulesV4, freeBeforeKeepers: v >= RulesV4, freeByPart: v >= RulesV4, underLender: v >= RulesV4,
		compensatedVictims: v >= RulesV4, excessWithoutPreemption: v >= RulesV4}
}

// validateRules refuses a plan naming a version this pool does not fold:
// one this build does not implement, or the version in development without
// development. A projector that meets one in the log (written by a newer
// ledger, or by a development build) must stop rather than skip it.
func validateRules(plan events.Plan, development bool) error {
	v := RulesVersion(plan.Rules)
	if plan.Rules == 0 || v.folds(development) {
		return nil
	}
	if v == RulesDevelopment {
		return refuse(ErrUnknownRules, "the plan asks for rules version %d, which is in development and not released; this build implements versions 1 to %d", plan.Rules, int(RulesNewest))
	}
	if development {
		return refuse(ErrUnknownRules, "the plan asks for rules version %d; this build implements versions 1 to %d, and %d in development", plan.Rules, int(RulesNewest), int(RulesDevelopment))
	}
	return refuse(ErrUnknownRules, "the plan asks for rules version %d; this build implements versions 1 to %d", plan.Rules, int(RulesNewest))
}

// StampRules returns the payload as the ledger appends it: a plan that
// names no rules version is given the newest (so every stored plan names
// its version); anything else is returned as it is. The payload passed in
// is not modified.
func StampRules(payload events.Payload) events.Payload { return StampRulesAs(payload, RulesNewest) }

// StampRulesAs is StampRules with another version: tests fold a log under
// each released version with it, and the in-memory tools under the version
// in development (ledger simulate --rules-development).
func StampRulesAs(payload events.Payload, v RulesVersion) events.Payload {
	pc, ok := payload.(*events.PlanChange)
	if !ok || pc.Plan.Rules != 0 {
		return payload
	}
	stamped := *pc
	stamped.Plan.Rules = int(v)
	return &stamped
}
