// Package gen generates random plans, hosts and event sequences for the
// engine's property tests, its fuzz target and the differential test
// against the independent reference model. Choices come from a Source: a
// seeded PRNG for property tests, or the fuzzer's bytes, so the fuzzer's
// coverage guidance steers the scenario itself. Trees stay small (a few
// levels, a few children) so rounding, ties and caps collide often, and a
// fraction of events is deliberately invalid.
package gen
