package mqlite

// Retries and the dead-letter queue in the model (S31, S33). A second
// pull consumer, group modelRetryGroup, reads every queue of the second
// plain topic and its group's retry topic, and commits after each batch.
// Each message has a plan drawn from its body: it fails (ReconsumeLater)
// its first k deliveries, k in 0..3. A failure of delivery n (reconsume
// count n) must come back once in the retry topic with count n+1 after
// RocketMQ's ladder delay (10 s, then 30 s: the retries are pending
// messages, see model_delay_test.go), and a failure of delivery
// modelMaxReconsume goes to the dead-letter queue once, never to the
// retry topic. So every message the group has seen is in exactly one
// state: consumed, pending retry (waiting to come due, or delivered to
// the retry topic and not yet consumed) or dead (S33); the final check
// drives every message to consumed or dead and counts the copies.
//
// After a crash the consumer resumes up to its committed offsets and
// delivers again what it had handled since its last persisted commit. The
// model's consumer then is idempotent: it recognises a delivery it handled
// (by unique key and reconsume count) and neither fails nor counts it
// again. That leaves the store's own guard against a second send-back of
// one delivery (retryScheduled, inDLQ) unexercised here: retention may
// remove the record that guard looks for, and the model could not tell a
// legitimate second chain from a wrong one. With FlushAsync a crash may
// also lose a retry or a dead letter that was acknowledged; the message
// is then lost, which only FlushAsync allows.

import (
	"strconv"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/topic"
)

const (
	modelRetryGroup   = "gr"
	modelMaxReconsume = 2
)

// modelOrigin is the retry state of one message the retry group has seen.
type modelOrigin struct {
	uniq  string
	fails int   // deliveries it fails before one succeeds
	next  int32 // the reconsume count of the delivery to handle next
	state string
	base  modelMsg // its first delivery, as the model knows it
	id    string   // ORIGIN_MESSAGE_ID: the ID of the first delivery
}

// origin states
const (
	originPending  = "pending retry"
	originConsumed = "consumed"
	originDead     = "dead"
	originLost     = "lost" // FlushAsync only: a crash lost its retry or dead letter
)

func (r *modelRun) retryTopic() string { return topic.RetryTopic(modelRetryGroup) }
func (r *modelRun) dlqTopic() string   { return topic.DLQTopic(modelRetryGroup) }

func newRetryConsumer() *modelConsumer {
	queues := []modelQueue{}
	for q := range modelTopics[1].queues {
		queues = append(queues, modelQueue{modelTopics[1].name, q})
	}
	queues = append(queues, modelQueue{topic.RetryTopic(modelRetryGroup), 0})
	return newModelConsumer(modelRetryGroup, ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, MaxReconsumeTimes: modelMaxReconsume}, queues)
}

// modelFails is a message's plan: how many deliveries it fails. Drawn
// from the body, so it does not depend on when the message is polled.
func modelFails(body []byte) int {
	switch b := body[0] % 8; {
	case b < 4:
		return 0
	case b < 7:
		return int(b) - 3
	}
	return modelMaxReconsume + 1 // dead
}

// rpoll takes the retry group's next messages and handles them per plan.
func (r *modelRun) rpoll() {
	n := 1 + r.rng.IntN(10) // drawn first: the sequence must not depend on what is pending
	got := r.rc.poll(r, n)
	for _, m := range got {
		r.handle(m)
	}
	if len(got) > 0 {
		r.rc.commit(r)
	}
}

// handle consumes delivery m of the retry group: fails it (per its plan)
// or consumes it.
func (r *modelRun) handle(m *MessageExt) {
	o := r.origins[m.UniqKey]
	if m.Topic != r.retryTopic() {
		require.Zero(r.t, m.ReconsumeTimes, "%s: a first delivery with a reconsume count", r.step)
		if o == nil {
			i := r.rc.index(m.Topic, m.QueueID)
			mq := r.rc.queues[i]
			o = &modelOrigin{uniq: m.UniqKey, fails: modelFails(m.Body), base: r.q[mq.topic][mq.q][m.QueueOffset], id: m.MsgID}
			if o.base.anyProps {
				o.base.props = m.Properties
			}
			o.base.anyProps, o.base.id, o.base.pend = false, "", nil
			r.origins[m.UniqKey] = o
		}
	} else {
		require.NotNil(r.t, o, "%s: a retry (unique key %s) of a message the group never failed", r.step, m.UniqKey)
		require.Equal(r.t, modelTopics[1].name, m.Properties[PropRetryTopic], "%s: retry topic property", r.step)
	}
	if m.ReconsumeTimes < o.next {
		return // delivered again after a crash: handled already
	}
	require.Equal(r.t, o.next, m.ReconsumeTimes, "%s: delivery of %s out of turn", r.step, m.UniqKey)
	require.NotEqual(r.t, originLost, o.state, "%s: a lost retry delivered", r.step)
	o.next++
	if int(m.ReconsumeTimes) >= o.fails {
		o.state = originConsumed
		return
	}
	want := o.base
	want.props = map[string]string{PropRetryTopic: modelTopics[1].name, PropOriginMsgID: o.id}
	for k, v := range o.base.props {
		want.props[k] = v
	}
	now := r.clk.Now()
	require.NoError(r.t, r.rc.pc.ReconsumeLater(r.ctx, m), r.step)
	if m.ReconsumeTimes >= modelMaxReconsume {
		want.props[PropOriginQueue] = strconv.Itoa(int(m.QueueID))
		want.reconsume, want.origin = m.ReconsumeTimes, o
		dlq := r.dlqTopic()
		r.q[dlq][0] = append(r.q[dlq][0], want)
		o.state = originDead
		return
	}
	want.reconsume, want.origin = m.ReconsumeTimes+1, o
	// RocketMQ's ladder: retry n waits delay level 2+n.
	p := &modelPending{topic: r.retryTopic(), q: 0, due: now.Add(DefaultDelayLevels[2+want.reconsume-1]), msg: want, uniq: o.uniq}
	r.pending = append(r.pending, p)
	o.state = originPending
}

// lost marks a message whose retry or dead letter a FlushAsync crash lost.
func (r *modelRun) lost(o *modelOrigin) {
	require.Equal(r.t, FlushAsync, r.cfg.flush, "%s: a retry or dead letter of %s was lost", r.step, o.uniq)
	o.state = originLost
}

// drain ends a sequence: the clock moves on until nothing is pending, the
// retry group consumes everything, and each message it saw must be
// consumed or dead, with one retry-topic copy per failure short of death
// and one dead letter if dead (S33).
func (r *modelRun) drain() {
	// Past every pending due time (at most 20 min away): the deletion hour
	// (11:00) is still hours off.
	r.clk.Advance(modelMaxDeliverAt + time.Minute)
	r.settle()
	for range 2*modelMaxReconsume + 4 {
		for r.rc.pending(r) {
			got := r.rc.poll(r, 64)
			for _, m := range got {
				r.handle(m)
			}
			r.rc.commit(r)
		}
		if len(r.pending) == 0 {
			break
		}
		r.clk.Advance(time.Minute) // retries wait 10 s and 30 s
		r.settle()
	}
	require.Empty(r.t, r.pending, r.step)
	require.False(r.t, r.rc.pending(r), r.step)
	// Each retry (reconsume count n) of a message is in the retry topic at
	// most once, and each dead message in the dead-letter queue at most
	// once; a power loss under FlushAsync may have taken copies handled
	// before it (the message's state moved on), so there every copy must
	// be one the state implies, and with FlushSync every such copy must be
	// there.
	copies := map[string]map[int32]int{}
	expired := map[string]bool{} // a retry retention removed before it was consumed
	for off, mm := range r.q[r.retryTopic()][0] {
		u := mm.origin.uniq
		if copies[u] == nil {
			copies[u] = map[int32]int{}
		}
		copies[u][mm.reconsume]++
		require.Equal(r.t, 1, copies[u][mm.reconsume], "%s: retry %d of %s twice", r.step, mm.reconsume, u)
		if int64(off) < r.min[r.retryTopic()][0] && mm.reconsume == mm.origin.next {
			expired[u] = true
		}
	}
	dead := map[string]int{}
	for _, mm := range r.q[r.dlqTopic()][0] {
		dead[mm.origin.uniq]++
		require.Equal(r.t, 1, dead[mm.origin.uniq], "%s: %s dead twice", r.step, mm.origin.uniq)
	}
	sync := r.cfg.flush == FlushSync
	for u, o := range r.origins {
		retries := 0 // the retries its state implies: 1..retries
		switch o.state {
		case originConsumed:
			retries = o.fails
			require.Zero(r.t, dead[u], "%s: a consumed message %s is dead too", r.step, u)
		case originDead:
			retries = modelMaxReconsume
			require.Equal(r.t, 1, dead[u], "%s: dead letters of %s", r.step, u)
		case originLost:
			require.False(r.t, sync, r.step)
			retries = int(o.next)
		case originPending:
			// Retention removes messages whether consumed or not.
			require.True(r.t, expired[u], "%s: %s is pending after the drain (next %d, fails %d, copies %v, dead %d, consumer at %v of %d)",
				r.step, u, o.next, o.fails, copies[u], dead[u], r.rc.delivered, len(r.q[r.retryTopic()][0]))
			retries = int(o.next)
			require.Zero(r.t, dead[u], "%s: a pending message %s is dead too", r.step, u)
		default:
			require.Failf(r.t, "unknown state", "%s: %s is %s", r.step, u, o.state)
		}
		for n := range copies[u] {
			require.True(r.t, n >= 1 && int(n) <= retries, "%s: %s (%s after %d fails) has retry %d", r.step, u, o.state, o.fails, n)
		}
		if sync {
			require.Len(r.t, copies[u], retries, "%s: retries of %s (%s after %d fails)", r.step, u, o.state, o.fails)
		}
	}
	// The dead letters as DeadLetters lists them.
	require.NoError(r.t, r.s.WaitVisible(r.ctx), r.step)
	want := r.q[r.dlqTopic()][0]
	lo := r.min[r.dlqTopic()][0]
	if int64(len(want)) > lo {
		got, err := r.s.DeadLetters(modelRetryGroup, lo, len(want)+1)
		require.NoError(r.t, err, r.step)
		require.Len(r.t, got, len(want)-int(lo), r.step)
		for i, m := range got {
			r.same(want, lo+int64(i), m)
		}
	}
}
