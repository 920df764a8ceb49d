// Package explain turns a consumer's decisions into words a cluster
// operator understands: which rule acted, on which host, from whom, and
// why that consumer and not another. It watches a fold event by event
// (from a scenario in memory or from the log) and keeps the story of one
// consumer; the numbers it quotes are read from the engine's state right
// after each event, adjusted by the event's own decisions where the state
// before matters (a victim's borrowing before it gave).
//
// In a pool with ownership (docs/rules.md#ownership) it also tells
// the consumer's ownership story (ownership.go): what it owns on which
// host, at which rank among its siblings and preference; the layers its
// slots come from; what it lent while idle, to whom and through which
// pool; when it took lent slots back, by which deadline and whose lend
// grace; and the decisions of kinds own, lend and return and the rules
// own.use and release.moved in words.
package explain
