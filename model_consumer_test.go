package mqlite

import (
	"context"
	"slices"
	"time"

	"github.com/stretchr/testify/require"
)

// modelQueue names one queue of a topic.
type modelQueue struct {
	topic string
	q     int
}

// modelConsumer is the model of a pull consumer with assigned queues: per
// queue, the next offset it must deliver, and what it committed, exactly
// if exact (a Commit since the last crash), else an upper bound. After a
// crash the persisted offset is anywhere up to the committed one (clamped
// to the queue's end), so the next delivery may start anywhere up to
// resync[i] (-1: it must start at delivered[i]).
type modelConsumer struct {
	group  string
	opts   ConsumerOptions
	queues []modelQueue
	pc     *PullConsumer

	delivered, committed, resync []int64
	exact                        []bool
}

func newModelConsumer(group string, opts ConsumerOptions, queues []modelQueue) *modelConsumer {
	n := len(queues)
	return &modelConsumer{group: group, opts: opts, queues: queues, delivered: make([]int64, n), committed: make([]int64, n),
		resync: slices.Repeat([]int64{-1}, n), exact: slices.Repeat([]bool{true}, n)}
}

// start creates the consumer on r's store and assigns its queues.
func (c *modelConsumer) start(r *modelRun) {
	pc, err := r.s.NewPullConsumer(c.group, c.opts)
	require.NoError(r.t, err, r.step)
	byTopic := map[string][]int{}
	var topics []string
	for _, mq := range c.queues {
		if byTopic[mq.topic] == nil {
			topics = append(topics, mq.topic)
		}
		byTopic[mq.topic] = append(byTopic[mq.topic], mq.q)
	}
	for _, tp := range topics {
		require.NoError(r.t, pc.Assign(tp, nil, byTopic[tp]...), r.step)
	}
	c.pc = pc
}

func (c *modelConsumer) index(topic string, q int) int {
	for i, mq := range c.queues {
		if mq.topic == topic && mq.q == int(q) {
			return i
		}
	}
	return -1
}

// pending says whether the model knows of a message for the consumer to
// deliver (a Poll would otherwise wait for one that is not coming).
func (c *modelConsumer) pending(r *modelRun) bool {
	for i, mq := range c.queues {
		p := c.delivered[i]
		if c.resync[i] >= 0 {
			p = c.resync[i]
		}
		if int64(len(r.q[mq.topic][mq.q])) > max(p, r.min[mq.topic][mq.q]) {
			return true
		}
	}
	return false
}

// poll takes up to n messages and checks each against the model: its
// queue's next offset (or, after a crash, one up to the committed
// offset; after retention, the min offset) and its contents.
func (c *modelConsumer) poll(r *modelRun, n int) []*MessageExt {
	if !c.pending(r) {
		return nil
	}
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second) // a watchdog, never reached when correct
	defer cancel()
	got, err := c.pc.Poll(ctx, n)
	require.NoError(r.t, err, "%s: poll of %s (a queue skipped past its messages?)", r.step, c.group)
	for _, m := range got {
		i := c.index(m.Topic, m.QueueID)
		require.GreaterOrEqual(r.t, i, 0, "%s: %s got a message of %s/%d, which it was not assigned", r.step, c.group, m.Topic, m.QueueID)
		mq := c.queues[i]
		low := r.min[mq.topic][mq.q]
		switch {
		case c.resync[i] >= 0:
			// A consumer behind the min offset continues from it.
			require.LessOrEqual(r.t, m.QueueOffset, max(c.resync[i], low), "%s: after a crash %s/%d resumed past its committed offset", r.step, mq.topic, mq.q)
			c.delivered[i], c.resync[i] = m.QueueOffset, -1
		case m.QueueOffset != c.delivered[i] && c.delivered[i] < low:
			// It moved to the min offset of a retention pass it saw (the
			// fetcher runs in the background: not necessarily the last).
			require.Contains(r.t, r.mins[mq], m.QueueOffset, "%s: %s/%d skipped from %d to %d, not to a min offset (now %d)", r.step, mq.topic, mq.q, c.delivered[i], m.QueueOffset, low)
			require.Greater(r.t, m.QueueOffset, c.delivered[i], "%s: %s/%d went back", r.step, mq.topic, mq.q)
			require.LessOrEqual(r.t, m.QueueOffset, low, "%s: %s/%d skipped past the min offset", r.step, mq.topic, mq.q)
			c.delivered[i] = m.QueueOffset
		}
		r.same(r.q[mq.topic][mq.q], c.delivered[i], m)
		c.delivered[i]++
	}
	return got
}

func (c *modelConsumer) commit(r *modelRun) {
	require.NoError(r.t, c.pc.Commit(), r.step)
	for i, p := range c.delivered {
		if c.resync[i] < 0 {
			c.committed[i], c.exact[i] = p, true
		}
	}
}

func (c *modelConsumer) close(r *modelRun) {
	require.NoError(r.t, c.pc.Close(), r.step)
}

// restarted follows a clean restart: offsets are written on Close.
func (c *modelConsumer) restarted(r *modelRun) {
	for i, mq := range c.queues {
		if c.exact[i] {
			c.delivered[i], c.resync[i] = c.committed[i], -1
		} else {
			c.resync[i] = min(c.committed[i], int64(len(r.q[mq.topic][mq.q])))
		}
	}
}

// crashed follows a power loss: the persisted offsets are anywhere up to
// the committed ones.
func (c *modelConsumer) crashed(r *modelRun) {
	for i, mq := range c.queues {
		c.committed[i] = min(c.committed[i], int64(len(r.q[mq.topic][mq.q])))
		c.resync[i], c.exact[i] = c.committed[i], false
	}
}
