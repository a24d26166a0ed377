package bench

import (
	"sync"
	"testing"
)

// TestQueueCountReachesTargetExactly: calls of 1 to 40 messages over
// uneven queues (passing the flush step mid-call) close reached at the
// call that makes the count reach the target, not one call earlier, and
// the sums are exact; concurrent callers close it once.
func TestQueueCountReachesTargetExactly(t *testing.T) {
	const target = 5000
	c := newQueueCount()
	c.target.Store(target)
	var n, b int64
	for i := 0; n < target; i++ {
		k := min(int64(1+i%40), target-n)
		select {
		case <-c.reached:
			t.Fatalf("reached closed at %d messages, before %d", n, target)
		default:
		}
		c.add(i*7%benchQueues, k, 3*k)
		n, b = n+k, b+3*k
	}
	select {
	case <-c.reached:
	default:
		t.Fatalf("reached not closed at %d messages", n)
	}
	if m, by := c.sum(); m != n || by != b {
		t.Fatalf("sum %d msgs, %d bytes; want %d, %d", m, by, n, b)
	}

	c = newQueueCount()
	c.target.Store(8 * target)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range target {
				c.add((g+i)%3, 1, 2) // three queues: shards shared by goroutines
			}
		})
	}
	wg.Wait()
	<-c.reached
	if m, by := c.sum(); m != 8*target || by != 16*target {
		t.Fatalf("concurrent sum %d msgs, %d bytes; want %d, %d", m, by, 8*target, 16*target)
	}
}
