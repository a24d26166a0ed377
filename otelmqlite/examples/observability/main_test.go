package main

import "testing"

// TestObservability runs the demo: every step checks its own errors
// (log.Fatal fails the test binary).
func TestObservability(t *testing.T) { main() }
