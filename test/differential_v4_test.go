package test

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/gen"
	"github.com/cluster-ledger/ledger/test/refmodel"
)

var (
	v4DiffRuns     = flag.Int("v4.runs", 300, "TestDifferentialV4: random logs of each generator compared under rules 4 (the issue asks for 1,000 per generator, CI 300)")
	v4DiffSeed     = flag.Uint64("v4.seed", 0, "TestDifferentialV4: compare only this log of each generator, and print its events")
	v4DiffShow     = flag.Int("v4.show", 5, "TestDifferentialV4: how many differing logs to print")
	v4DiffAnyOrder = flag.Bool("v4.anyorder", false, "TestDifferentialV4: compare each event's decisions summed per (kind, consumer, from, host, rule, deadline), in any order (to see past differences of order)")
	v4DiffScenario = flag.Bool("v4.asscenario", false, "TestDifferentialV4: show the first difference as a scenario file compares a step (decisions summed per kind, consumer, from, rule and deadline; allocations per consumer)")
	v4DiffStrict   = flag.Bool("v4.strict", false, "TestDifferentialV4: fail on any differing ownership log, not only below the ratchet")
)

// v4Disputes are the engine disputes written up in
// test/refmodel/testdata/engine-disputes (the spec, worked by hand, sides
// with the model; TestEngineDisputes checks that the engine still fails
// each) that refmodel can fold the engine's way (Model.AsEngineOn): a log
// that agrees so differs only by written-up disputes. 58: an owner's
// preference for a host as the engine ranks it (withOwnership seed 1000).
var v4Disputes = []int{58}

// v4Ratchet is, per generator and reclaim mode of a log with ownership,
// the least share of logs (per mille) that must agree exactly under rules
// 4, the lower of what 300 and 1,000 logs of each generator gave on
// 2026-11-27 (see TestDifferentialV4). Raise it as the model or the engine is corrected;
// never lower it without saying why in the commit: a drop means the engine
// or the model changed what it decides. Priority logs are expected to move
// while the engine builds ruling 12 (the seating under priority).
var v4Ratchet = map[string]int{
	"gen.GenerateOwned share_ratio": 742, // 106 of 142, 341 of 459 with the model's #525 and #526; 106 of 142, 341 of 459 with the engine's #516 and #518; 106 of 142, 340 of 459 with the model's #510 to #512; 105 of 142, 335 of 459 with the model's #500; 105 of 142, 334 of 459 with the engine's #493; 106 of 142, 333 of 459 with the model's #486; 105 of 142, 329 of 459 with the model's #485; 103 of 142, 327 of 459 with the model's #473 (reading (k)); 102 of 142, 321 of 459 with the model's #454; 101 of 142, 320 of 459 with the engine's #432 and #433; 101 of 142, 319 of 459 with the model's #417; 101 of 142, 318 of 459 with the model's #416; 101 of 142, 313 of 459 with the engine's #410 (#431); 99 of 142, 308 of 459 with the engine's #406 and #409; 99 of 142, 308 of 459 with the engine's #401 to #405; 97 of 142, 306 of 459 with the model's #392; 92 of 142, 289 of 459 with the model's #390; 90 of 142, 284 of 459 with the engine's #384; 90 of 142 (300 logs), 283 of 459 (1,000) with the model's #368 and the engine's #383; 90 and 282 with the model's #366 and #367 and the engine's #379 to #382; 88 and 275 with the model's #364 and #365; 86 and 271 with the free slots first of #378 and the canonical rows of #377; 73 and 239 before #377 (with the engine's #355 to #358)
	"gen.GenerateOwned priority":    748, // 122 of 158, 405 of 541 with the model's #525 and #526; 122 of 158, 404 of 541 with the engine's #516 and #518; 121 of 158, 397 of 541 with the model's #510 to #512; 121 of 158, 394 of 541 with the model's #499; 120 of 158, 393 of 541 with the engine's #493; 118 of 158, 388 of 541 with the model's #486; 117 of 158, 384 of 541 with the model's #485; 117 of 158, 383 of 541 with the model's #473 (reading (k)); 116 of 158, 382 of 541 with the model's #454; 116 of 158, 379 of 541 with the model's #418; 116 of 158, 378 of 541 with the model's #417; 115 of 158, 377 of 541 with the model's #416; 114 of 158, 376 of 541 with the model's #414; 114 of 158, 375 of 541 with the engine's #410 (#431); 113 of 158, 367 of 541 with the engine's #406 and #409; 112 of 158, 365 of 541 with the engine's #401 to #405; 112 of 158, 361 of 541 with the model's #392; 109 of 158, 350 of 541 with the model's #391; 109 of 158, 349 of 541 with the model's #390; 108 of 158, 346 of 541 with the model's #389; 108 of 158, 345 of 541 with the model's #388; 108 of 158, 344 of 541 with #384; 108 of 158, 343 of 541 with #368 and #383; 108 and 341 with #366, #367 and #379 to #382; 105 and 334 with #364 and #365; 103 and 331 with #377 and #378; 88 and 282 before them, 84 and 261 before #348
	"withOwnership share_ratio":     755, // 111 of 142, 347 of 459 with the model's #525 and #526; 111 of 142, 346 of 459 with the engine's #516 and #518; 110 of 142, 338 of 459 with the model's #510 to #512; 110 of 142, 337 of 459 with the model's #500; 109 of 142, 336 of 459 with the engine's #493; 108 of 142, 333 of 459 with the engine's #490; 108 of 142, 332 of 459 with the model's #486; 105 of 142, 328 of 459 with the model's #485; 105 of 142, 327 of 459 with the model's #473 (lowered by the one log reading (k) costs, the lead's decision: seed 566 differs at its rebalance on which leaf takes the public slots and which the lent one); 105 of 142, 328 of 459 with the engine's #472; 105 of 142, 327 of 459 with the model's #454; 103 of 142, 324 of 459 with the model's #419; 102 of 142, 323 of 459 with the engine's #432 and #433; 102 of 142, 321 of 459 with the model's #417; 102 of 142, 320 of 459 with the model's #416; 102 of 142, 319 of 459 with the model's #415; 102 of 142, 316 of 459 with the engine's #410 (#431); 102 of 142, 316 of 459 with the model's #411 (lowered by the one log reading (h) costs, the lead's decision: seed 337 differs at event 40 on a rule label); 102 of 142, 317 of 459 with the engine's #406 and #409; 102 of 142, 315 of 459 with the engine's #401 to #405; 102 of 142, 313 of 459 with the model's #392; 97 of 142, 306 of 459 with the model's #391; 96 of 142, 304 of 459 with the model's #390; 94 of 142, 300 of 459 with the model's #388; 94 of 142, 299 of 459 with #384; 94 of 142, 298 of 459 with #366, #367 and #379 to #382; 94 and 293 with #364 and #365; 94 and 292 with #377 and #378; 84 and 267 before them, 78 and 251 before #348
	"withOwnership priority":        677, // 107 of 158, 391 of 541 with the model's #525 and #526; 107 of 158, 389 of 541 with the engine's #516 and #518; 106 of 158, 386 of 541 with the model's #510 to #512; 106 of 158, 383 of 541 with the engine's #493; 106 of 158, 383 of 541 with the model's #486; 105 of 158, 378 of 541 with the model's #473 (reading (k)); 104 of 158, 376 of 541 with the engine's #472; 104 of 158, 375 of 541 with the model's #454; 102 of 158, 368 of 541 with the model's #416; 101 of 158, 366 of 541 with the engine's #410 (#431); 101 of 158, 357 of 541 with the model's #411; 100 of 158, 355 of 541 with the engine's #406 and #409; 100 of 158, 351 of 541 with the engine's #401 to #405; 99 of 158, 349 of 541 with the model's #392; 97 of 158, 338 of 541 with the model's #391; 96 of 158, 336 of 541 with the model's #390; 95 of 158, 334 of 541 with the model's #389; 94 of 158, 333 of 541 with the model's #387; 93 of 158, 332 of 541 with the model's #385; 93 of 158, 331 of 541 with #384; 92 of 158, 325 of 541 with #366, #367 and #379 to #382; 91 and 322 with #364 and #365; 90 and 320 with #377 and #378; 78 and 287 before them, 73 and 266 before #348
}

// v4ScenarioRatchet is the same for the logs that agree as a scenario file
// compares them (v4Options.asScenario), from 2026-11-27 (#332).
var v4ScenarioRatchet = map[string]int{
	"gen.GenerateOwned share_ratio": 746, // 106 of 142, 350 of 459 with the model's #525 and #526; 106 of 142, 350 of 459 with the engine's #516 and #518; 106 of 142, 349 of 459 with the model's #510 to #512; 105 of 142, 346 of 459 with the model's #500 (of 2,000 logs withOwnership seed 507 agrees newly and gen.GenerateOwned seed 623, differing exactly before and after at event 32 by a grant's host, differs newly at event 34); 105 of 142, 347 of 459 with the engine's #493 (lowered by the one log of 300 it costs, the lead's decision: seed 81, a reclaim's host; of 2,000 logs 12 agree newly and 3 differ newly); 106 of 142, 346 of 459 with the model's #486; 106 of 142, 343 of 459 with the model's #485; 104 of 142, 341 of 459 with the model's #473 (lowered by the one log of 300 reading (k) costs, the lead's decision: seed 141 differs newly; of 1,000, 141 differs newly and 908 agrees newly); 105 of 142, 341 of 459 with the model's #454; 105 of 142, 341 of 459 with the engine's #432 and #433; 105 of 142, 339 of 459 with the model's #417; 105 of 142, 338 of 459 with the model's #416; 105 of 142, 333 of 459 with the engine's #410 (#431); 103 of 142, 328 of 459 with the engine's #406 and #409; 103 of 142, 328 of 459 with the engine's #401 to #405; 101 of 142, 325 of 459 with the model's #392; 98 of 142, 318 of 459 with the model's #390; 97 of 142, 316 of 459 with the model's #385; 97 of 142, 315 of 459 with the engine's #384; 96 of 142, 313 of 459 with the model's #368 and the engine's #383; 95 and 310 with the model's #366 and #367 and the engine's #379 to #382; 93 and 303 with the model's #364 and #365; 91 and 299 with the engine's #378 and the model's #363; 89 and 296 before them (with the model's #348 to #351 and the engine's #353 to #358)
	"gen.GenerateOwned priority":    767, // 127 of 158, 415 of 541 with the model's #525 and #526; 127 of 158, 414 of 541 with the engine's #516 and #518; 126 of 158, 412 of 541 with the model's #510 to #512; 126 of 158, 411 of 541 with the engine's #493; 125 of 158, 409 of 541 with the model's #486; 125 of 158, 408 of 541 with the model's #485; 125 of 158, 407 of 541 with the model's #473 (reading (k)); 125 of 158, 407 of 541 with the model's #454; 125 of 158, 404 of 541 with the model's #418; 125 of 158, 403 of 541 with the model's #417; 124 of 158, 401 of 541 with the model's #416; 124 of 158, 400 of 541 with the model's #415 (a later share_ratio plan); 124 of 158, 399 of 541 with the model's #414; 124 of 158, 398 of 541 with the engine's #410 (#431); 122 of 158, 388 of 541 with the engine's #406 and #409; 120 of 158, 385 of 541 with the engine's #401 to #405; 120 of 158, 382 of 541 with the model's #392; 118 of 158, 376 of 541 with the model's #391; 118 of 158, 375 of 541 with the model's #390; 118 of 158, 373 of 541 with the model's #389; 118 of 158, 372 of 541 with the model's #388; 118 of 158, 371 of 541 with the model's #385; 117 of 158, 370 of 541 with #384; 116 of 158, 368 of 541 with #368 and #383; 116 and 366 with #366, #367 and #379 to #382; 113 and 359 with #364 and #365; 111 and 356 before them; 106 and 348 before #363 and #378
	"withOwnership share_ratio":     782, // 115 of 142, 359 of 459 with the model's #525 and #526; 115 of 142, 359 of 459 with the engine's #516 and #518; 115 of 142, 356 of 459 with the model's #510 to #512; 115 of 142, 356 of 459 with the engine's #493; 115 of 142, 353 of 459 with the engine's #490; 115 of 142, 352 of 459 with the model's #486; 115 of 142, 351 of 459 with the model's #473 (lowered by the two logs reading (k) costs, the lead's decision: seeds 566 and 798); 115 of 142, 353 of 459 with the engine's #472; 115 of 142, 352 of 459 with the model's #454; 112 of 142, 347 of 459 with the model's #419; 111 of 142, 346 of 459 with the engine's #432 and #433; 111 of 142, 343 of 459 with the model's #417; 111 of 142, 342 of 459 with the model's #416; 111 of 142, 341 of 459 with the model's #415; 111 of 142, 338 of 459 with the engine's #410 (#431); 110 of 142, 337 of 459 with the model's #411 (lowered by the one log reading (h) costs, the lead's decision); 110 of 142, 338 of 459 with the engine's #406 and #409; 109 of 142, 335 of 459 with the engine's #401 to #405; 109 of 142, 333 of 459 with the model's #392; 106 of 142, 330 of 459 with the model's #391; 104 of 142, 326 of 459 with the model's #390; 102 of 142, 322 of 459 with the model's #388; 102 of 142, 321 of 459 with #384; 102 of 142, 319 of 459 with #366, #367 and #379 to #382; 100 and 311 with #364 and #365; 100 and 310 before them; 97 and 307 before #363 and #378
	"withOwnership priority":        689, // 109 of 158, 400 of 541 with the model's #525 and #526; 109 of 158, 398 of 541 with the engine's #516 and #518; 109 of 158, 396 of 541 with the model's #510 to #512; 109 of 158, 395 of 541 with the model's #500; 109 of 158, 394 of 541 with the engine's #493; 109 of 158, 395 of 541 with the model's #486; 109 of 158, 394 of 541 with the model's #473 (reading (k)); 109 of 158, 393 of 541 with the engine's #472; 109 of 158, 392 of 541 with the model's #454; 107 of 158, 385 of 541 with the model's #416; 106 of 158, 383 of 541 with the engine's #410 (#431); 105 of 158, 372 of 541 with the model's #411; 104 of 158, 370 of 541 with the engine's #406 and #409; 104 of 158, 366 of 541 with the engine's #401 to #405; 103 of 158, 364 of 541 with the model's #392; 103 of 158, 360 of 541 with the model's #391; 102 of 158, 357 of 541 with the model's #390; 101 of 158, 355 of 541 with the model's #389; 100 of 158, 354 of 541 with the model's #387; 99 of 158, 353 of 541 with #385; 99 of 158, 351 of 541 with #384; 98 of 158, 345 of 541 with #366, #367 and #379 to #382; 96 and 341 with #364 and #365; 95 and 339 before them; 92 and 337 before #363 and #378
}

// TestDifferentialV4 is the differential test of rules version 4 (issue
// 24): random logs of three generators, gen.Generate (no ownership),
// gen.GenerateOwned and withOwnership (this package's), every plan renamed
// to rules 4, folded through the engine (domain.WithDevelopmentRules) and
// through the reference model (refmodel.NewRules4, written from
// rules-v4.md alone), event by event: the same refusal, the same decisions
// in the same order (kind, consumer, from, host, slots, rule and deadline)
// and the same allocations per (consumer, host).
//
// Logs without ownership must all agree. Logs with ownership are counted
// per generator and reclaim mode (the first plan's) and held to v4Ratchet:
// fewer agreeing logs than it allows fails, and the first differences are
// printed (generator, seed, event, expected (reference) vs found
// (engine)); -v4.strict fails on any difference; -v4.seed=N prints a log.
// Each count also says how many of the differing logs agree once the
// model folds the written-up engine disputes the engine's way (v4Disputes).
//
// On 2026-11-27 (engine and model as of this commit), 300 logs of each
// generator (the default; 1,000 with -v4.runs=1000, in about 20 s on a
// loaded 2-core machine):
//
//	generator, first plan's reclaim   agree (300)   agree (1,000)   as a scenario (300, 1,000)
//	gen.Generate (no ownership)       300 of 300    1,000 of 1,000  300, 1,000
//	GenerateOwned share_ratio         106 of 142      341 of 459    106, 350
//	GenerateOwned priority            122 of 158      405 of 541    127, 415
//	withOwnership share_ratio         111 of 142      347 of 459    115, 359
//	withOwnership priority            107 of 158      391 of 541    109, 400
//
// (with the model's #525, under priority with preemption an owner's excess
// reads the rounds' seating and idle moves are cut latest first, and
// #526, dues swapped by the part a holder sits on whatever each leaf calls
// its source; before them, with the engine's #516 and #518, 404, 341, 389
// and 346 of 1,000 exactly, 414, 350, 398 and 359 as a scenario file
// compares them: gen.GenerateOwned seed 890 and withOwnership seeds 654,
// 901 and 970 agree newly, none differs newly; the first 300 unchanged)
//
// (with the engine's #516 and #518; before them 106, 121, 110 and 106 of
// 300 and 340, 397, 338 and 386 of 1,000 exactly, 106, 126, 115 and 109
// and 349, 412, 356 and 396 as a scenario file compares them)
//
// (with the model's #510, a release gives back a host's slots of a tier
// whole before it measures "most" again, #512, a release under priority
// without preemption reads #218's seating, and #511, the keepers' seating
// under priority with preemption is ruling 8's as written (#383); before
// them 105, 121, 110 and 106 of 300 and 335, 394, 337 and 383 of 1,000
// exactly, 105, 126, 115 and 109 and 346, 411, 356 and 395 as a scenario
// file compares them: gen.GenerateOwned seeds 294, 418, 460, 652, 703,
// 781, 828 and 884 and withOwnership seeds 424, 668, 941 and 947 agree
// newly, none differs newly)
//
// (with the model's #500, a holder's dues swapped with a claimant's only
// where the free room of the claimant's source is short; before it 105,
// 121, 109 and 106 of 300 and 334, 394, 336 and 383 of 1,000 exactly, 347
// and 394 of 1,000 as a scenario file compares them for GenerateOwned
// share_ratio and withOwnership priority: gen.GenerateOwned seed 376 and
// withOwnership seed 205 agree newly, none differs newly)
//
// (with the model's #499, a holder at its target seated on a part beyond
// what its division gave it of that source is seated on a free part of
// the same host it is due instead, making room for the claimant due the
// part; before it, with the engine's #493, 120 of 158 and 393 of 541
// exactly for GenerateOwned priority, the other counts as now:
// gen.GenerateOwned seed 165 agrees newly, none differs newly)
//
// (with the engine's #490, a keep counted against the division's
// guarantee wherever the placement keeps; before it 332 of 1,000 exactly
// and 352 as a scenario file compares them for withOwnership share_ratio)
//
// (with the model's #486, a share_ratio reclaim takes first the victim's
// slots of the sources the division gave the claimant; before it 105,
// 117, 105 and 105 of 300 and 329, 384, 328 and 378 of 1,000 exactly, 106,
// 125, 115 and 109 and 343, 408, 351 and 394 as a scenario file compares
// them)
//
// (with the model's #485, a share_ratio victim left short gives up a slot
// of a part nearer to it than to the claimant last; before it 103, 117,
// 105 and 105 of 300 and 327, 383, 327 and 378 of 1,000 exactly, 104, 125,
// 115 and 109 and 341, 407, 351 and 394 as a scenario file compares them)
//
// (with the model's #473, the lead's reading (k) of round 8: a share_ratio
// rebalance's first round serves its claimants in the order as the
// rebalance starts, an owner whose own slots are not in use counting its
// whole target as its deficit; before it 102, 116, 105 and 104 of 300 and
// 321, 382, 328 and 376 of 1,000 exactly, 105, 125, 115 and 109 and 341,
// 407, 353 and 393 as a scenario file compares them: the lead's decision
// costs withOwnership share_ratio seed 566 (and 798 as a scenario file
// compares them), whose ratchets moved down by them, and gen.GenerateOwned
// share_ratio seeds 141 and 443 (141 of the first 300 as a scenario file
// compares them, whose ratchet moved down by it))
//
// (with the engine's #472, engine dispute 51 settled; before it 327 and
// 375 of 1,000 exactly and 352 and 392 as a scenario file compares them
// for withOwnership share_ratio and priority; the model's #455 changed no
// count)
//
// (with the model's #454, a share_ratio claimant's free slots placed in
// the tier its division gave them; before it, at the end of round 7, 101,
// 116, 103 and 102 of 300 and 320, 380, 324 and 371 of 1,000 exactly,
// 105, 125, 112 and 107 and 341, 405, 347 and 388 as a scenario file
// compares them)
//
// (with the model's #419, ruling 9's stand-in on the owner's own part
// recorded as a return; before it 102 of 142 and 323 of 459 exactly and
// 111 and 346 as a scenario file compares them for withOwnership
// share_ratio)
//
// (with the model's #418, the part of a reclaimed slot recorded as a
// grant's is (#417); before it, with the engine's #432 and #433 (which
// gave 1, 2, 1 and 2 logs of 1,000 exactly and 0, 2, 1, 3 as a scenario
// file compares them), 378 and 369 of 1,000 exactly and 403 and 386 as a
// scenario file compares them for the priority generators)
//
// (with the model's #417, ruling 9's swap and #385's netting reading the
// part of a compensation grant from the grant; before it 115 of 158
// (300 logs) and 318, 377 and 320 of 1,000 exactly, 124 of 158 and 338,
// 401 and 342 as a scenario file compares them)
//
// (with the model's #416, a share_ratio victim gives first the slots the
// claimant may take; before it 101, 114, 102 and 101 of 300 and 313, 376,
// 319 and 366 of 1,000 exactly, 105, 124, 111 and 106 and 333, 400, 341
// and 383 as a scenario file compares them)
//
// (with the model's #415, a share_ratio claimant takes a free slot only
// where it may take it, ruling 4's "may take"; before it 316 of 459
// exactly and 399 and 338 as a scenario file compares them for
// withOwnership share_ratio and GenerateOwned priority)
//
// (with the model's #413, a reclaim made up by the victim's entitled gain
// on another host recorded as ruling 7's move, no count changed; and
// #414, a priority reclaim of the victim's slot on the claimant's
// ancestor's private part, where the victim sat, recorded as ruling 8's
// return; before it, with the engine's #410 (#431), 375 of 541 exactly
// and 398 as a scenario file compares them for GenerateOwned priority)
//
// (with the engine's #410 (#431), ruling 9's swap taking a reclaim as
// compensation; before it 99, 113, 102 and 101 of 300 and 308, 368, 316
// and 357 of 1,000 exactly, 103, 122, 110 and 105 and 328, 389, 337 and
// 372 as a scenario file compares them)
//
// (with the model's #411, the lead's reading (h) of round 6: a leaf whose
// demand is met but that a deeper pool serves waits from this event;
// before it 102 and 100 of 300 and 317 and 355 of 1,000 exactly, 110 and
// 104 and 338 and 370 as a scenario file compares them, for withOwnership
// share_ratio and priority: the lead's decision costs withOwnership
// share_ratio one log, seed 337, whose ratchet moved down by it)
//
// (with the engine's #406 and #409, before them 112 and 100 of 300 and
// 365, 315 and 351 of 1,000 exactly, 120, 109 and 104 and 385, 335 and 366
// as a scenario file compares them for GenerateOwned priority and
// withOwnership)
//
// (with the engine's #401 to #405, round 6's engine disputes 38 to 41, 43
// and 45 settled, after the model's #392 of the same day: before them 97,
// 112, 102 and 99 of 300 and 306, 361, 313 and 349 of 1,000 exactly, 101,
// 120, 109 and 103 and 325, 382, 333 and 364 as a scenario file compares
// them)
//
// (with the model's #392, a private pool's division under priority with
// preemption bounds a leaf by its ancestors' max less only what earlier
// layers gave; before it 92, 109, 97 and 97 of 300 and 289, 350, 306 and
// 338 of 1,000 exactly, 98, 118, 106 and 103 and 318, 376, 330 and 360
// as a scenario file compares them. The generators' first plan names the
// key; later plans switch reclaim mode, so share_ratio keys move too)
//
// (with the model's #391, a reclaim netted against the victim's reclaim on
// the same host; before it 96 and 96 of 300 and 349, 304 and 336 of 1,000
// exactly, 104 and 102 and 375, 326 and 357 as a scenario file compares
// them for the three that changed)
//
// (with the model's #390, a release works the seating out again after
// each host; before it 90, 108, 94 and 95 of 300 and 284, 346, 300 and
// 334 of 1,000 exactly, 97, 118, 102 and 101 and 316, 373, 322 and 355
// as a scenario file compares them)
//
// (with the model's #389, a branch leaf takes its pool's free slots on
// every host before a return; before it 345 and 333 of 1,000 exactly and
// 372 and 354 as a scenario file compares them for the two priority
// generators, 94 and 100 of 158 (300 logs) for withOwnership priority)
//
// (with the model's #387, an owner held below its use by an ancestor's
// max reclaims it from a sibling's share slots under priority, and #388,
// a group entry does not come back to its host entry's slots; before them
// 344, 299 and 332 of 1,000 exactly and 371, 321 and 353 as a scenario
// file compares them for the three that changed, and 93 of 158 (300
// logs) for withOwnership priority, 99 as a scenario)
//
// (with the model's #385, the lead's reading (c): a victim compensated on
// another host in the same rebalance is not reclaimed from, the claimant
// takes the compensation; before it 331 of 541 exactly for withOwnership
// priority, and as a scenario file compares them 117 of 158 (300 logs)
// for GenerateOwned priority and 315, 370 and 351 of 1,000 for
// GenerateOwned share_ratio and priority and withOwnership priority)
//
// (with the engine's #384, an owner's running slots kept on its own part
// before a restrictive lent part; before it 90, 108, 94 and 92 of 300 and
// 283, 343, 298 and 329 of 1,000 exactly, 96, 116, 102 and 98 and 313,
// 368, 319 and 349 as a scenario file compares them)
//
// (with the model's #368, a claimant blocked by a max takes a free slot
// where a sibling inside it gives one up, and the engine's #383, the
// keepers' seating under priority by ruling 8's passes; before them 282,
// 341 and 325 of 1,000 exactly and 310, 366 and 345 as a scenario file
// compares them for the three that changed)
//
// (with the model's #366, an owner under a capped ancestor moves onto its
// own free slot, and #367, an ineligible holding is released before an
// owner's excess, and the engine's #379 to #382 (engine disputes 25 to 30,
// 34 and 35 settled); before them 88, 105, 94 and 91 of 300 and 275, 334,
// 293 and 322 of 1,000 exactly, 93, 113, 100 and 96 and 303, 359, 311 and
// 341 as a scenario file compares them)
//
// (with the model's #364, a move whose freed slots stay free is cut, and
// #365, every owner takes its part back before any owner's excess goes;
// before them 86, 103, 94 and 90 of 300 and 271, 331, 292 and 320 of
// 1,000 exactly, 91, 111, 100 and 95 and 299, 356, 310 and 339 as a
// scenario file compares them)
//
// (with the engine's #378, the claimant served first takes the free
// slots, and the model's #363; before them 98, 84, 87 and 93 of 300 and
// 327, 270, 319 and 291 of 1,000 exactly, 106, 89, 92 and 97 and 348,
// 296, 337 and 307 as a scenario file compares them)
//
// (with an event's rows merged and in the canonical order of #377, in the
// engine and the model; before it, with the engine's #357 and #358, 73,
// 88, 84 and 78 of 300 and 239, 282, 267 and 287 of 1,000 exactly)
//
// (with the model's reclaims of one turn recorded in the order section 17
// places the leaf's gains, #348, and a descendant's take-back of its
// parent's private slots swapped like an owner's return, #349, an
// owner's or a descendant's take-back from a leaf that may no longer hold
// the part made a return, #350 and #351, and the engine's #355 and #356
// (engine disputes 21 and 22 settled), and the
// engine's #353, a branch's take-back without preemption, and #354, a
// reclaim inside a capped branch; before
// them 66, 84, 78 and 73 of 300 and 218, 261, 251 and 266 of 1,000
// exactly (with the engine's #347: 219, 262, 251, 267), 81, 100, 95 and
// 88 of 300 and 278, 329, 296 and 327 of 1,000 as a scenario file
// compares them)
//
// (with the model's priority pools taking a private part back only from
// the outsiders seated on it, its ruling 9 swap under every policy, and
// the engine's #340 and #341; before them, with #332, 252, 214, 243 and
// 237 of 1,000 exactly, 313, 273, 293 and 277 as a scenario file compares
// them; before #332, 64, 80, 74 and 69 of 300 and 208, 247, 231 and 241
// of 1,000 exactly)
//
// (with the model's #320, a victim giving up first on the hosts that had
// most free slots as the rebalance started, and the engine's #327 and
// #329; before #320, after #327, 64, 77, 69 and 68 of 300 and 202, 231,
// 221 and 237 of 1,000)
//
// (with the model's #318, a priority pool giving up to what earlier
// layers left unmet and the public pool moving the rest, and #319, the
// releases of revoked holdings after the returns; before them 56, 75, 68
// and 67 of 300 and 188, 220, 219 and 227 of 1,000)
//
// (with the model settling to rest as the engine does, #237, ordering a
// rebalance's grants as section 17 places them, #238, and reclaiming in a
// priority pool only what that pool seats, #239, and the engine releasing
// an ineligible holding before the gains, #326; before them 51, 65, 60
// and 51 of 300 and 176, 187, 194 and 191 of 1,000)
//
// (since the engine settles to rest, #236, folds a plan that owns nothing
// without layers, #322, takes a pool's own slots first in the group every
// leaf may use, #323, a branch's private slots back up to its targets,
// #324, and reclaims inside a capped parent, #325; before them 42, 57, 53 and 48 of 300 and 156,
// 165, 169 and 176 of 1,000)
//
// (the model following the engine owner's settlements of rules 4, #216,
// #218 and #246; before them 41, 57, 53 and 48 of 300, 155, 165, 169 and
// 176 of 1,000: docs/decisions.md #235)
//
// The same morning, before the model's corrections of that day, 85 of 300
// logs without ownership agreed (the model gave a reclaim no deadline) and
// 84 and 80 of 300 ownership logs. Of the ownership logs that still
// differ, a few differ only by the engine disputes the model can fold the
// engine's way (the counts logged say how many), none only by the order
// of the rows within an event since #377 (-v4.anyorder sums them, for
// pools without ownership, whose order both sides keep as released), and
// the rest by what is decided, not adjudicated yet
// (test/refmodel/AMBIGUITIES.md, "The differential test of rules 4"; the
// engine disputes 01-12 are settled, testdata/settled-*.yaml, 13-17 by
// #341 and #342, 18 and 20 by #353, 19, 21 and 22 by #354 to #356, 23 by
// #357, 24 by #358, 32 and 33 by #378, 25 to 30, 34 and 35 by #379 to
// #382, 38 and 39 by #401, 40, 41, 43 and 45 by #402 to #405, 46 by #406,
// 47 by #409, 44 by #412, 31 by #432, 48 by #433, 49 by #434; open ones,
// 36, 42 and 50 at the end of round 7, are in
// test/refmodel/testdata/engine-disputes). The readings
// the model took where the spec is open are docs/decisions.md #232-#234,
// #235, #348-#351, #363-#368, #385, #387-#392, #407, #408, #410, #411
// and #413-#419.
//
// Part D's plan fields (priority_bands, preemptable, share: 0) are not
// drawn: events.Plan does not carry them yet; once it does, refmodel's
// ownedPlanOf maps them (OwnedPlan's PriorityBands and Preemptable) and
// the generators can draw them.
func TestDifferentialV4(t *testing.T) {
	generators := []struct {
		name string
		make func(seed uint64) gen.Scenario
	}{
		{"gen.Generate", func(seed uint64) gen.Scenario { return gen.Generate(gen.NewRand(seed), 40) }},
		{"gen.GenerateOwned", func(seed uint64) gen.Scenario { return gen.GenerateOwned(gen.NewRand(seed), 40) }},
		{"withOwnership", func(seed uint64) gen.Scenario { return withOwnership(gen.Generate(gen.NewRand(seed), 40), seed) }},
	}
	first, last := uint64(1), uint64(*v4DiffRuns)
	if *v4DiffSeed != 0 {
		first, last = *v4DiffSeed, *v4DiffSeed
	}
	type count struct{ logs, agree, disputesOnly, asScenario int }
	counts := map[string]*count{}
	var keys []string
	var strictDiffs, ratchetDiffs []string
	for _, g := range generators {
		for seed := first; seed <= last; seed++ {
			sc := g.make(seed)
			sc.Events = rules4(sc.Events)
			key := g.name
			if g.name != "gen.Generate" {
				key += " " + planReclaim(sc.Events[0])
			}
			c := counts[key]
			if c == nil {
				c = &count{}
				counts[key] = c
				keys = append(keys, key)
			}
			c.logs++
			msg := compareV4WithReference(sc, v4Options{anyOrder: *v4DiffAnyOrder})
			if msg == "" {
				c.agree++
				c.asScenario++
				continue
			}
			if m := compareV4WithReference(sc, v4Options{asScenario: true}); m == "" {
				c.asScenario++
			} else if *v4DiffScenario {
				msg = m
			}
			if len(v4Disputes) > 0 && compareV4WithReference(sc, v4Options{anyOrder: *v4DiffAnyOrder, asEngineOn: v4Disputes}) == "" {
				c.disputesOnly++
			}
			d := fmt.Sprintf("%s seed %d (%s): %s", g.name, seed, policyKey(sc.Events[0]), msg)
			if *v4DiffSeed != 0 {
				d += "\nevents:\n" + dumpEvents(sc.Events)
			}
			if g.name == "gen.Generate" || *v4DiffStrict {
				strictDiffs = append(strictDiffs, d)
			} else {
				ratchetDiffs = append(ratchetDiffs, d)
			}
		}
	}
	slices.Sort(keys)
	below := false
	for _, k := range keys {
		c := counts[k]
		t.Logf("rules 4, %s: %d of %d logs agree exactly, %d as a scenario file compares them; %d more differ only by written-up engine disputes", k, c.agree, c.logs, c.asScenario, c.disputesOnly)
		if floor, ok := v4Ratchet[k]; ok && *v4DiffSeed == 0 && c.agree*1000 < floor*c.logs {
			t.Errorf("rules 4, %s: %d of %d logs agree, the ratchet wants at least %d per mille", k, c.agree, c.logs, floor)
			below = true
		}
		if floor, ok := v4ScenarioRatchet[k]; ok && *v4DiffSeed == 0 && c.asScenario*1000 < floor*c.logs {
			t.Errorf("rules 4, %s: %d of %d logs agree as a scenario file compares them, the ratchet wants at least %d per mille", k, c.asScenario, c.logs, floor)
			below = true
		}
	}
	show := func(ds []string) {
		for i, d := range ds {
			if i == *v4DiffShow {
				t.Errorf("... and %d more logs differ", len(ds)-i)
				break
			}
			t.Errorf("%s", d)
		}
	}
	show(strictDiffs)
	if below || *v4DiffSeed != 0 {
		show(ratchetDiffs)
	}
}

// planReclaim is the reclaim mode of a log's first plan.
func planReclaim(p events.Payload) string {
	if pc, ok := p.(*events.PlanChange); ok {
		return pc.Plan.Policy.ReclaimOrDefault()
	}
	return ""
}

// rules4 renames every plan of a log to rules version 4.
func rules4(evs []events.Payload) []events.Payload {
	out := make([]events.Payload, len(evs))
	for i, p := range evs {
		if pc, ok := p.(*events.PlanChange); ok {
			q := *pc
			q.Plan.Rules = 4
			p = &q
		}
		out[i] = p
	}
	return out
}

// v4Options says how compareV4WithReference compares.
type v4Options struct {
	anyOrder bool // an event's decisions summed per (kind, consumer, from, host, rule, deadline), in any order
	// asScenario: as a scenario file (docs/scenarios.md) compares a step:
	// each event's decisions summed per (kind, consumer, from, rule,
	// deadline), in any order and whatever the host, and each consumer's
	// allocation, not per host.
	asScenario bool
	asEngineOn []int // engine disputes the model folds the engine's way (refmodel's AsEngineOn)
}

// compareV4WithReference folds sc through the engine and the model
// (rules 4) and returns the first difference, "" when none.
func compareV4WithReference(sc gen.Scenario, opt v4Options) string {
	pool, ref := domain.NewPool("diffv4", domain.WithDevelopmentRules()), refmodel.NewRules4().AsEngineOn(opt.asEngineOn...)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	for i, ev := range sc.Events {
		at = at.Add(time.Second)
		var got domain.Result
		var gotErr error
		if panicked := func() (p any) {
			defer func() { p = recover() }()
			got, gotErr = pool.Apply(domain.Event{Seq: seq + 1, Time: at, Payload: ev})
			return nil
		}(); panicked != nil {
			return fmt.Sprintf("event %d (%s): engine panicked: %v", i, ev.EventType(), panicked)
		}
		want, wantErr := ref.Apply(seq+1, at, ev)
		if errors.Is(wantErr, refmodel.ErrNotModelled) {
			return fmt.Sprintf("event %d (%s): not modelled: %v", i, ev.EventType(), wantErr)
		}
		if (gotErr != nil) != (wantErr != nil) {
			return fmt.Sprintf("event %d (%s): refusal differs:\n expected (reference): %v\n found (engine):       %v",
				i, ev.EventType(), wantErr, gotErr)
		}
		if gotErr != nil {
			continue
		}
		seq++
		g, w := engineDecisionsV4(got.Decisions), referenceDecisionsV4(want)
		switch {
		case opt.asScenario:
			g, w = summedV4(withoutHost(g)), summedV4(withoutHost(w))
		case opt.anyOrder:
			g, w = summedV4(g), summedV4(w)
		}
		if !slices.Equal(g, w) {
			return fmt.Sprintf("event %d (%s, seq %d): decisions differ:\n expected (reference): %s\n found (engine):       %s",
				i, ev.EventType(), seq, strings.Join(w, "; "), strings.Join(g, "; "))
		}
		if opt.asScenario {
			w := ref.Allocations()
			maps.DeleteFunc(w, func(_ string, n int64) bool { return n == 0 })
			if a := engineTotals(pool); !maps.Equal(a, w) {
				return fmt.Sprintf("event %d (%s, seq %d): allocations differ:\n expected (reference): %v\n found (engine):       %v",
					i, ev.EventType(), seq, w, a)
			}
			continue
		}
		if h, w := engineHosts(pool), ref.HostAllocations(); !maps.EqualFunc(h, w, maps.Equal) {
			return fmt.Sprintf("event %d (%s, seq %d): allocations per (consumer, host) differ:\n expected (reference): %v\n found (engine):       %v",
				i, ev.EventType(), seq, w, h)
		}
	}
	return ""
}

// engineDecisionsV4 and referenceDecisionsV4 print decisions with their
// deadlines (rules 4 settles them: rulings 8, 10, 11, 13).
func engineDecisionsV4(ds []domain.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		dl := "-"
		if d.Deadline != nil {
			dl = d.Deadline.UTC().Format(time.RFC3339)
		}
		out[i] = fmt.Sprintf("%s %s<-%s %s %d %s %s", d.Kind, d.Consumer, d.From, d.Host, d.Slots, d.Rule, dl)
	}
	return out
}

func referenceDecisionsV4(ds []refmodel.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		dl := "-"
		if !d.Deadline.IsZero() {
			dl = d.Deadline.UTC().Format(time.RFC3339)
		}
		out[i] = fmt.Sprintf("%s %s<-%s %s %d %s %s", d.Kind, d.Consumer, d.From, d.Host, d.Slots, d.Rule, dl)
	}
	return out
}

// withoutHost blanks the host of printed decisions (asScenario).
func withoutHost(ds []string) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		f := strings.Fields(d)
		f[2] = "*"
		out[i] = strings.Join(f, " ")
	}
	return out
}

// summedV4 sums an event's printed decisions per (kind, consumer, from,
// host, rule, deadline) and sorts them (-v4.anyorder).
func summedV4(ds []string) []string {
	sum := map[string]int64{}
	for _, d := range ds {
		f := strings.Fields(d)
		var n int64
		fmt.Sscan(f[3], &n)
		k := strings.Join(append(append([]string{}, f[:3]...), f[4:]...), " ")
		sum[k] += n
	}
	var out []string
	for k, n := range sum {
		if n != 0 {
			out = append(out, fmt.Sprintf("%s %d", k, n))
		}
	}
	slices.Sort(out)
	return out
}
