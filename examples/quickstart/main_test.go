package main

import (
	"testing"

	"github.com/mqlite/mqlite/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestQuickstart runs the demo the README starts with: every step checks
// its own errors (log.Fatal fails the test binary).
func TestQuickstart(t *testing.T) { main() }
