//go:build !race

package mqlite

const raceEnabled = false
