package bench

import (
	"sync"
	"sync/atomic"
)

// queueCount counts what a push consumer's handler goroutines consume the
// way a handler that keeps state per queue would: a counter of messages
// and one of bytes for each queue, each queue's on its own cache lines, so
// that two handler goroutines on different cores touch the same line only
// when they consume the same queue. One shared counter made every call move
// that line between the cores: 60-100 ns of CPU a 128 B message on this
// machine (BenchmarkConsume's push row's shape, 3 runs), a cost of the
// harness's handler, not of the consumer.
//
// reached is closed once the messages counted reach target. A shard adds
// to the total only each time its count passes a multiple of
// queueCountStep; once the total is within the shards' unflushed
// remainders of the target, a call sums the shards exactly.
type queueCount struct {
	shards [benchQueues]struct {
		msgs, bytes atomic.Int64
		_           [48]byte // the next shard's counters on another line
	}
	flushed atomic.Int64 // multiples of queueCountStep the shards passed
	target  atomic.Int64 // -1 until Count sets it
	once    sync.Once
	reached chan struct{}
}

// queueCountStep is how many messages a shard counts between two adds to
// the shared total.
const queueCountStep = 64

func newQueueCount() *queueCount {
	c := &queueCount{reached: make(chan struct{})}
	c.target.Store(-1)
	return c
}

// add counts a handler call's msgs messages of bodies totalling bytes,
// all of queue q.
func (c *queueCount) add(q int, msgs, bytes int64) {
	sh := &c.shards[uint(q)%benchQueues]
	sh.bytes.Add(bytes)
	n := sh.msgs.Add(msgs)
	if steps := n/queueCountStep - (n-msgs)/queueCountStep; steps > 0 {
		c.flushed.Add(steps * queueCountStep)
	}
	t := c.target.Load()
	if t < 0 || c.flushed.Load() < t-benchQueues*queueCountStep {
		return
	}
	if m, _ := c.sum(); m >= t {
		c.once.Do(func() { close(c.reached) })
	}
}

// sum is the messages and bytes counted so far.
func (c *queueCount) sum() (msgs, bytes int64) {
	for i := range c.shards {
		msgs += c.shards[i].msgs.Load()
		bytes += c.shards[i].bytes.Load()
	}
	return msgs, bytes
}
