package commitlog

import (
	"testing"

	"github.com/mqlite/mqlite/internal/leakcheck"
)

// Every Log stops its allocator goroutine on Close.
func TestMain(m *testing.M) { leakcheck.Main(m) }
