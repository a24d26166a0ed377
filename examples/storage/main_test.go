package main

import (
	"testing"

	"github.com/mqlite/mqlite/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// Example runs the program and checks what it prints.
func Example() {
	main()
	// Output:
	// commitlog: records end at 0 (validated from 0, 0 torn bytes dropped)
	// appended order-0 at commitlog offset 0
	// appended order-1 at commitlog offset 54
	// appended order-2 at commitlog offset 108
	// appended order-3 at commitlog offset 162
	// appended order-4 at commitlog offset 216
	// commitlog: records end at 378 (validated from 0, 0 torn bytes dropped)
	// queue before dispatch: 5 entries
	// queue after dispatch:  7 entries
	// queue offset 6 -> commitlog 324: order-6 created
	// key order-3 -> commitlog 162: order 3 created
}
