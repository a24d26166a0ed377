//go:build !race

package broker

// raceEnabled: see stopClient.
const raceEnabled = false
