//go:build race

package message

// raceEnabled: the race detector makes sync.Pool drop a share of what it
// is given, so recycling tests allow for some fresh blocks.
const raceEnabled = true
