package mqlite

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/vfs"
)

// recorder is a push handler that records every message it gets, per
// member and queue, in delivery order.
type recorder struct {
	mu  sync.Mutex
	got map[string][]string // "member topic:queue" -> bodies
	all map[string]int      // body -> deliveries
}

func newRecorder() *recorder {
	return &recorder{got: map[string][]string{}, all: map[string]int{}}
}

func (r *recorder) handler(member string) Handler {
	return func(_ context.Context, ms []*MessageExt) ConsumeResult {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, m := range ms {
			k := fmt.Sprintf("%s %s:%d", member, m.Topic, m.QueueID)
			r.got[k] = append(r.got[k], string(m.Body))
			r.all[string(m.Body)]++
		}
		return ConsumeSuccess
	}
}

// queue returns what member got from topic:queue, in order.
func (r *recorder) queue(member, topic string, q int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got[fmt.Sprintf("%s %s:%d", member, topic, q)])
}

// total is the number of deliveries.
func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.all {
		n += c
	}
	return n
}

// exactlyOnce fails unless every body of want was delivered exactly once
// and nothing else was.
func (r *recorder) exactlyOnce(t *testing.T, want []string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Len(t, r.all, len(want))
	for _, b := range want {
		require.Equal(t, 1, r.all[b], "deliveries of %s", b)
	}
}

// putN stores n messages on each queue of topic with bodies
// "topic/queue/seq", seq counting on from from, and returns them.
func putN(t *testing.T, s *Store, topic string, queues, from, n int) []string {
	t.Helper()
	var out []string
	for q := range queues {
		for i := from; i < from+n; i++ {
			b := fmt.Sprintf("%s/%d/%03d", topic, q, i)
			_, err := s.Put(context.Background(), &Message{Topic: topic, Body: []byte(b)}, q)
			require.NoError(t, err)
			out = append(out, b)
		}
	}
	return out
}

// qu is queue id of topic.
func qu(topic string, id int) consumer.Queue { return consumer.Queue{Topic: topic, ID: id} }

// only returns the queues of qs on the topics listed.
func only(qs []consumer.Queue, topics ...string) []consumer.Queue {
	return slices.DeleteFunc(slices.Clone(qs), func(q consumer.Queue) bool { return !slices.Contains(topics, q.Topic) })
}

// seqBodies is what putN stored on topic:queue for seq in [from, to).
func seqBodies(topic string, q, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s/%d/%03d", topic, q, i))
	}
	return out
}

// TestPushPauseResume: a paused queue gets nothing while messages are
// stored (checked after Settle, the barrier), keeps its committed offset,
// and after Resume gets the rest in order, once; resuming one queue of a
// paused topic leaves the others paused. Concurrent and orderly.
func TestPushPauseResume(t *testing.T) {
	for _, orderly := range []bool{false, true} {
		t.Run(fmt.Sprintf("orderly=%v", orderly), func(t *testing.T) {
			clk := clock.NewFake(t0)
			s := delayStore(t, vfs.NewMem(), clk)
			defer s.Close()
			ctx := context.Background()
			require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
			c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, Orderly: orderly, ConsumeBatchSize: 3, Goroutines: 1})
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.Subscribe("t", nil))
			rec := newRecorder()
			require.NoError(t, c.Start(rec.handler("a")))
			want := putN(t, s, "t", 2, 0, 10)
			require.NoError(t, s.Settle(ctx))
			require.Equal(t, 20, rec.total())

			require.NoError(t, c.Pause("t"))
			require.Equal(t, []consumer.Queue{qu("t", 0), qu("t", 1)}, c.Paused())
			require.NoError(t, s.Settle(ctx))
			want = append(want, putN(t, s, "t", 2, 10, 10)...)
			require.NoError(t, s.Settle(ctx))
			require.Equal(t, 20, rec.total(), "delivered while paused")
			offs, err := s.ConsumerOffsets("g")
			require.NoError(t, err)
			for _, o := range offs {
				if o.Topic == "t" {
					require.Equal(t, int64(10), o.Offset, "committed offset of %s kept", o.Queue)
				}
			}

			require.NoError(t, c.Resume("t", 1))
			require.Equal(t, []consumer.Queue{qu("t", 0)}, c.Paused())
			require.NoError(t, s.Settle(ctx))
			require.Equal(t, seqBodies("t", 0, 0, 10), rec.queue("a", "t", 0), "queue 0 still paused")
			require.Equal(t, seqBodies("t", 1, 0, 20), rec.queue("a", "t", 1))

			require.NoError(t, c.Resume("t"))
			require.Empty(t, c.Paused())
			require.NoError(t, s.Settle(ctx))
			want = append(want, putN(t, s, "t", 2, 20, 5)...)
			require.NoError(t, s.Settle(ctx))
			require.Equal(t, seqBodies("t", 0, 0, 25), rec.queue("a", "t", 0))
			require.Equal(t, seqBodies("t", 1, 0, 25), rec.queue("a", "t", 1))
			rec.exactlyOnce(t, want)
		})
	}
}

// TestPushPauseAcrossRebalance: a member pauses its topic; a second
// member joins and takes half the queues (consuming them, as its own are
// not paused) while the first's stay paused; when the second leaves, the
// queues coming back arrive paused; Resume then delivers everything left,
// exactly once over both members.
func TestPushPauseAcrossRebalance(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 4}))
	rec := newRecorder()
	start := func(name string) *PushConsumer {
		c, err := s.NewPushConsumer("g", ConsumerOptions{InstanceName: name, ConsumeFromWhere: ConsumeFromFirstOffset, Goroutines: 1})
		require.NoError(t, err)
		require.NoError(t, c.Subscribe("t", nil))
		require.NoError(t, c.Start(rec.handler(name)))
		return c
	}
	a := start("a")
	defer a.Close()
	require.NoError(t, s.Settle(ctx))
	require.NoError(t, a.Pause("t"))
	want := putN(t, s, "t", 4, 0, 5)
	require.NoError(t, s.Settle(ctx))
	require.Zero(t, rec.total())

	b := start("b")
	defer b.Close()
	require.NoError(t, s.Settle(ctx))
	aq, bq := only(a.Assignment(), "t"), only(b.Assignment(), "t")
	require.Len(t, aq, 2)
	require.Len(t, bq, 2)
	require.Equal(t, aq, a.Paused(), "a's queues stay paused after the rebalance")
	require.Empty(t, b.Paused())
	want = append(want, putN(t, s, "t", 4, 5, 5)...)
	require.NoError(t, s.Settle(ctx))
	for _, q := range bq {
		require.Equal(t, seqBodies("t", q.ID, 0, 10), rec.queue("b", "t", q.ID), "b consumes its queues")
	}
	for _, q := range aq {
		require.Empty(t, rec.queue("a", "t", q.ID), "a's paused queues")
	}

	require.NoError(t, b.Shutdown(ctx))
	require.NoError(t, s.Settle(ctx))
	require.Len(t, only(a.Assignment(), "t"), 4)
	require.Equal(t, only(a.Assignment(), "t"), a.Paused(), "queues handed back to a arrive paused")
	want = append(want, putN(t, s, "t", 4, 10, 5)...)
	require.NoError(t, s.Settle(ctx))
	require.Equal(t, 20, rec.total(), "only b's deliveries")

	require.NoError(t, a.Resume("t"))
	require.NoError(t, s.Settle(ctx))
	for _, q := range aq {
		require.Equal(t, seqBodies("t", q.ID, 0, 15), rec.queue("a", "t", q.ID))
	}
	for _, q := range bq {
		require.Equal(t, seqBodies("t", q.ID, 10, 15), rec.queue("a", "t", q.ID), "a goes on where b stopped")
	}
	rec.exactlyOnce(t, want)
}

// TestPushUnsubscribePersisted: with two members on two topics, one
// unsubscribes from t2: its t2 queues go to the other, which gets every
// t2 message from then on. After a Close/Open of the store, both members
// restore their subscriptions from the group's config: the one that
// unsubscribed does not get t2 again (nor is it paused: a pause is not
// kept across a restart). When the last member unsubscribes, the group's
// subscription to t2 is gone.
func TestPushUnsubscribePersisted(t *testing.T) {
	clk := clock.NewFake(t0)
	fs := vfs.NewMem()
	s := delayStore(t, fs, clk)
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("t1", TopicConfig{Queues: 2}))
	require.NoError(t, s.CreateTopic("t2", TopicConfig{Queues: 2}))
	rec := newRecorder()
	start := func(s *Store, name string, topics ...string) *PushConsumer {
		c, err := s.NewPushConsumer("g", ConsumerOptions{InstanceName: name, ConsumeFromWhere: ConsumeFromFirstOffset, Goroutines: 1})
		require.NoError(t, err)
		for _, tp := range topics {
			require.NoError(t, c.Subscribe(tp, nil))
		}
		require.NoError(t, c.Start(rec.handler(name)))
		return c
	}
	a := start(s, "a", "t1", "t2")
	b := start(s, "b", "t1", "t2")
	require.NoError(t, s.Settle(ctx))
	require.NoError(t, a.Pause("t1"))
	require.NoError(t, a.Unsubscribe("t2"))
	require.NoError(t, s.Settle(ctx))
	for _, q := range a.Assignment() {
		require.NotEqual(t, "t2", q.Topic, "a still holds %s", q)
	}
	require.Contains(t, b.Assignment(), qu("t2", 0))
	require.Contains(t, b.Assignment(), qu("t2", 1))
	want := putN(t, s, "t2", 2, 0, 5)
	require.NoError(t, s.Settle(ctx))
	for q := range 2 {
		require.Equal(t, seqBodies("t2", q, 0, 5), rec.queue("b", "t2", q))
		require.Empty(t, rec.queue("a", "t2", q))
	}
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.NoError(t, s.Close())

	s = delayStore(t, fs, clk)
	defer s.Close()
	a = start(s, "a") // restores the group's subscriptions
	defer a.Close()
	require.NoError(t, s.Settle(ctx))
	require.Equal(t, []consumer.Queue{qu("t1", 0), qu("t1", 1)}, only(a.Assignment(), "t1", "t2"), "alone, a gets t1 only")
	require.Empty(t, a.Paused(), "a pause is not kept across a restart")
	b = start(s, "b")
	defer b.Close()
	require.NoError(t, s.Settle(ctx))
	require.Contains(t, b.Assignment(), qu("t2", 0))
	require.Contains(t, b.Assignment(), qu("t2", 1))
	want = append(want, putN(t, s, "t2", 2, 5, 5)...)
	want = append(want, putN(t, s, "t1", 2, 0, 5)...)
	require.NoError(t, s.Settle(ctx))
	for q := range 2 {
		require.Equal(t, seqBodies("t2", q, 0, 10), rec.queue("b", "t2", q))
		require.Empty(t, rec.queue("a", "t2", q))
	}
	rec.exactlyOnce(t, want)

	require.NoError(t, b.Unsubscribe("t2"))
	gs := s.ConsumerGroups()
	require.Len(t, gs, 1)
	require.Equal(t, []consumer.Subscription{{Topic: "t1", Expression: "*"}}, gs[0].Subscriptions, "nobody subscribes to t2 any more")
	require.NoError(t, s.Settle(ctx))
	require.Empty(t, only(append(a.Assignment(), b.Assignment()...), "t2"))
}

// TestPushPauseBadInput: each bad call returns its typed error and
// changes nothing: no queue is paused, subscriptions stay, delivery goes
// on.
func TestPushPauseBadInput(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Subscribe("t", nil))
	require.NoError(t, c.Subscribe("later", nil)) // not created yet

	require.ErrorIs(t, c.Pause("t"), ErrInvalidArgument, "before Start")
	require.ErrorIs(t, c.Resume("t"), ErrInvalidArgument, "before Start")
	require.ErrorIs(t, c.Unsubscribe("t"), ErrInvalidArgument, "before Start")
	rec := newRecorder()
	require.NoError(t, c.Start(rec.handler("a")))

	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"pause unsubscribed topic", func() error { return c.Pause("other") }, ErrInvalidArgument},
		{"pause empty topic", func() error { return c.Pause("") }, ErrInvalidArgument},
		{"pause negative queue", func() error { return c.Pause("t", 0, -1) }, ErrInvalidArgument},
		{"pause queue past the end", func() error { return c.Pause("t", 2) }, ErrInvalidArgument},
		{"pause a queue of a topic not created", func() error { return c.Pause("later", 0) }, ErrTopicNotFound},
		{"resume unsubscribed topic", func() error { return c.Resume("other") }, ErrInvalidArgument},
		{"resume queue past the end", func() error { return c.Resume("t", 5) }, ErrInvalidArgument},
		{"unsubscribe unsubscribed topic", func() error { return c.Unsubscribe("other") }, ErrInvalidArgument},
		{"unsubscribe the retry topic", func() error { return c.Unsubscribe("%RETRY%g") }, ErrInvalidArgument},
		{"unsubscribe empty topic", func() error { return c.Unsubscribe("") }, ErrInvalidArgument},
	} {
		require.ErrorIs(t, tc.call(), tc.want, tc.name)
		require.Empty(t, c.Paused(), tc.name)
	}
	gs := s.ConsumerGroups()
	require.Len(t, gs, 1)
	require.Len(t, gs[0].Subscriptions, 2, "subscriptions unchanged")
	want := putN(t, s, "t", 2, 0, 3)
	require.NoError(t, s.Settle(ctx))
	rec.exactlyOnce(t, want)

	require.NoError(t, c.Pause("later"), "a whole topic not created yet may be paused")
	require.NoError(t, c.Resume("t", 1), "resuming what is not paused")
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Pause("t"), ErrClosed)
	require.ErrorIs(t, c.Resume("t"), ErrClosed)
	require.ErrorIs(t, c.Unsubscribe("t"), ErrClosed)
	var nilc *PushConsumer
	require.ErrorIs(t, nilc.Pause("t"), ErrInvalidArgument)
	require.ErrorIs(t, nilc.Resume("t"), ErrInvalidArgument)
	require.ErrorIs(t, nilc.Unsubscribe("t"), ErrInvalidArgument)
}

// TestPushPauseResumeConcurrent: Pause and Resume race from several
// goroutines (whole topic and single queues) while messages are stored
// and consumed by several workers; once a final Resume of the topic
// returns, every message is delivered exactly once and nothing stays
// paused. Run with -race.
func TestPushPauseResumeConcurrent(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 4}))
	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, Goroutines: 4})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Subscribe("t", nil))
	rec := newRecorder()
	require.NoError(t, c.Start(rec.handler("a")))
	var wg sync.WaitGroup
	errc := make(chan error, 4*50)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				var err error
				switch (g + i) % 4 {
				case 0:
					err = c.Pause("t")
				case 1:
					err = c.Resume("t", i%4)
				case 2:
					err = c.Pause("t", (i+g)%4)
				default:
					err = c.Resume("t")
				}
				errc <- err
			}
		}()
	}
	want := putN(t, s, "t", 4, 0, 25)
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	require.NoError(t, c.Resume("t"))
	require.Empty(t, c.Paused())
	require.NoError(t, s.Settle(ctx))
	rec.exactlyOnce(t, want)
}
