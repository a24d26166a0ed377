//go:build race

package mqlite

// raceEnabled: the race detector makes sync.Pool drop a share of what it
// is given, so allocation counts are not meaningful under it.
const raceEnabled = true
