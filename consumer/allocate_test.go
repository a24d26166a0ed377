package consumer

import (
	"fmt"
	"reflect"
	"testing"
)

func TestAllocateTable(t *testing.T) {
	members3 := []string{"a", "b", "c"}
	cases := []struct {
		name     string
		s        AllocateStrategy
		queues   int
		members  []string
		expected map[string][]int
	}{
		{"averagely 8/3", Averagely, 8, members3, map[string][]int{"a": {0, 1, 2}, "b": {3, 4, 5}, "c": {6, 7}}},
		{"averagely 10/4", Averagely, 10, []string{"a", "b", "c", "d"},
			map[string][]int{"a": {0, 1, 2}, "b": {3, 4, 5}, "c": {6, 7}, "d": {8, 9}}},
		{"averagely 9/3", Averagely, 9, members3, map[string][]int{"a": {0, 1, 2}, "b": {3, 4, 5}, "c": {6, 7, 8}}},
		{"averagely 2/3", Averagely, 2, members3, map[string][]int{"a": {0}, "b": {1}, "c": {}}},
		{"averagely 3/3", Averagely, 3, members3, map[string][]int{"a": {0}, "b": {1}, "c": {2}}},
		{"averagely 1/1", Averagely, 1, []string{"a"}, map[string][]int{"a": {0}}},
		{"averagely unsorted input", Averagely, 8, []string{"c", "a", "b"},
			map[string][]int{"a": {0, 1, 2}, "b": {3, 4, 5}, "c": {6, 7}}},
		{"circle 8/3", AveragelyByCircle, 8, members3, map[string][]int{"a": {0, 3, 6}, "b": {1, 4, 7}, "c": {2, 5}}},
		{"circle 2/3", AveragelyByCircle, 2, members3, map[string][]int{"a": {0}, "b": {1}, "c": {}}},
		{"no queues", Averagely, 0, members3, map[string][]int{"a": {}, "b": {}, "c": {}}},
		{"no members", ConsistentHash, 4, nil, map[string][]int{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.s.Allocate("t", c.queues, c.members)
			if !reflect.DeepEqual(got, c.expected) {
				t.Fatalf("got %v, want %v", got, c.expected)
			}
		})
	}
}

// every queue goes to exactly one member, for every strategy and size.
func TestAllocateCoversEveryQueueOnce(t *testing.T) {
	for _, s := range []AllocateStrategy{Averagely, AveragelyByCircle, ConsistentHash} {
		for n := 0; n <= 20; n++ {
			for c := 1; c <= 7; c++ {
				var ids []string
				for i := range c {
					ids = append(ids, fmt.Sprintf("m%d", i))
				}
				owner := map[int]string{}
				for id, qs := range s.Allocate("topic", n, ids) {
					for _, q := range qs {
						if prev, ok := owner[q]; ok {
							t.Fatalf("%s %d/%d: queue %d to %s and %s", s, n, c, q, prev, id)
						}
						owner[q] = id
					}
				}
				if len(owner) != n {
					t.Fatalf("%s %d/%d: %d queues assigned", s, n, c, len(owner))
				}
			}
		}
	}
}

func owners(a map[string][]int) map[int]string {
	out := map[int]string{}
	for id, qs := range a {
		for _, q := range qs {
			out[q] = id
		}
	}
	return out
}

// When a member leaves, only its queues move; when one joins, queues only
// move to it.
func TestAllocateConsistentHashStable(t *testing.T) {
	ids := []string{"m0", "m1", "m2", "m3", "m4"}
	const n = 64
	before := owners(ConsistentHash.Allocate("orders", n, ids))
	after := owners(ConsistentHash.Allocate("orders", n, []string{"m0", "m1", "m3", "m4"})) // m2 left
	moved := 0
	for q := range n {
		if before[q] != "m2" && after[q] != before[q] {
			t.Fatalf("queue %d moved from %s to %s though %s stayed", q, before[q], after[q], before[q])
		}
		if before[q] == "m2" {
			moved++
			if after[q] == "m2" {
				t.Fatalf("queue %d still on the departed member", q)
			}
		}
	}
	if moved == 0 {
		t.Fatalf("m2 owned no queue of %d; the test proves nothing", n)
	}
	joined := owners(ConsistentHash.Allocate("orders", n, append(ids, "m5")))
	for q := range n {
		if joined[q] != before[q] && joined[q] != "m5" {
			t.Fatalf("queue %d moved from %s to %s when m5 joined", q, before[q], joined[q])
		}
	}
	// Averagely, by contrast, moves queues between members that stayed.
	a1 := owners(Averagely.Allocate("orders", n, ids))
	a2 := owners(Averagely.Allocate("orders", n, []string{"m0", "m1", "m3", "m4"}))
	shifted := false
	for q := range n {
		if a1[q] != "m2" && a1[q] != a2[q] {
			shifted = true
		}
	}
	if !shifted {
		t.Fatal("averagely kept every surviving assignment: the stability check above is not discriminating")
	}
}

// The ring hash is MD5's first four bytes, big-endian: a known value.
func TestRingHash(t *testing.T) {
	// md5("a") = 0cc175b9c0f1b6a8...
	if got := ringHash("a"); got != 0x0cc175b9 {
		t.Fatalf("ringHash(a) = %#x", got)
	}
}
