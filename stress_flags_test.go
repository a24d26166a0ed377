package mqlite

import "flag"

// Repetition counts of the long stress tests. The defaults keep the
// README's go test -race ./... within a laptop's minutes; CI asks for the
// full counts (.ci/run). The other stress flags sit beside their tests:
// -model.seqs, -model.ops, -powerloss.images, -crash.cycles,
// -crash.async-cycles, -s26.each, -churn.cycles (Linux only).
var (
	closeRounds = flag.Int("close.rounds", 8, "rounds of TestPutsRacingClose (round r waits for 50(r+1) acks)")
	timersCount = flag.Int("timers.count", 30_000, "timers set by TestTimersFireOnTime")
)
