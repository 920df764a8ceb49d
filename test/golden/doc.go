// Package golden freezes the behaviour of every released rules version
// (docs/rules.md, "Rules versions"). logs/ holds event logs exactly as the
// ledger stores them: one per scenario file of test/scenarios, a few
// hundred seeded random logs of every policy and enforcement, with plan
// and host changes and refused events, and a hundred random logs with
// ownership (plans naming rules 3; versions 1 and 2 refuse them). v<N>.json holds, for each log, what
// rules version N makes of it: the number of events and refusals, a digest
// of its decisions, its final chain hash, and a short prefix of every
// chain link so that a failure names the first event that differs.
//
// TestGolden re-folds every log under every version, through the same
// projections.Fold the projector and the auditors use, and fails on any
// difference. A plan in a log that names no rules version is folded under
// the version being checked; under version 1 it is left as it is, as a
// plan written before versions existed. TestGoldenV3KeepsV2WithoutOwnership
// holds every log without ownership to the same decisions under versions
// 2 and 3.
//
// The records are written only by the test's own flags, and never
// rewritten:
//
//	go test ./test/golden -golden.make-logs      # add logs for new scenario files / seeds
//	go test ./test/golden -golden.add-logs       # record the new logs under every version
//	go test ./test/golden -golden.add-version 4  # record every log under a new version
package golden
