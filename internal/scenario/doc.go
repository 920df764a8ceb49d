// Package scenario reads scenario files (the YAML format of
// docs/scenarios.md), folds them in memory through the engine,
// and checks a step's expectations against any source of allocations and
// decisions, so that `ledger simulate` (in memory) and `ledger load
// --check` (through the whole service) judge a scenario the same way.
package scenario
