// Package explain turns a consumer's decisions into words a cluster
// operator understands: which rule acted, on which host, from whom, and
// why that consumer and not another. It watches a fold event by event
// (from a scenario in memory or from the log) and keeps the story of one
// consumer; the numbers it quotes are read from the engine's state right
// after each event, adjusted by the event's own decisions where the state
// before matters (a victim's borrowing before it gave).
package explain
