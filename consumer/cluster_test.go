package consumer

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/mqlite/mqlite/message"
)

const clusterMessages = 100_000

// Clean hand-offs (a member joining, one shutting down) redeliver nothing:
// each of 100,000 messages reaches exactly one member exactly once.
func TestClusteringExactlyOnceAcrossRebalance(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 8)
	cnt := newCounter(clusterMessages)
	o := Options{ConsumeFromWhere: ConsumeFromFirstOffset, Goroutines: 4, ConsumeBatchSize: 8, QueueCacheCount: 256}
	var cs []*PushConsumer
	for _, id := range []string{"a", "b", "c"} {
		o.InstanceName = id
		cs = append(cs, e.push("g", o, "t", cnt.handler(id)))
	}
	e.st.putMany("t", 30_000, "m")
	waitFor(t, cnt.atLeast(10_000), "10k messages")

	o.InstanceName = "d"
	cs = append(cs, e.push("g", o, "t", cnt.handler("d"))) // joins mid-stream
	assertAssignment(t, e.mg, "g", map[string]int{"a": 2, "b": 2, "c": 2, "d": 2})
	e.st.putMany("t", 30_000, "n")
	waitFor(t, cnt.atLeast(40_000), "40k messages")

	if err := cs[0].Shutdown(context.Background()); err != nil { // a leaves mid-stream
		t.Fatal(err)
	}
	assertAssignment(t, e.mg, "g", map[string]int{"b": 3, "c": 3, "d": 2})
	e.st.putMany("t", 40_000, "o")
	waitFor(t, cnt.done, "100k messages")
	for _, c := range cs[1:] {
		if err := c.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	distinct, dups := cnt.dups()
	if distinct != clusterMessages || dups != 0 {
		t.Fatalf("distinct %d (want %d), duplicates %d (want 0)", distinct, clusterMessages, dups)
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if len(cnt.by[id]) == 0 {
			t.Fatalf("member %s consumed nothing", id)
		}
	}
	for q := range 8 {
		if got := e.committed("g", "", "t", q); got != clusterMessages/8 {
			t.Fatalf("queue %d committed %d, want %d", q, got, clusterMessages/8)
		}
	}
}

// assertAssignment checks how many queues of "t" each live member holds.
func assertAssignment(t *testing.T, mg *Manager, group string, want map[string]int) {
	t.Helper()
	gi, err := mg.Group(group)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	owner := map[Queue]string{}
	for _, m := range gi.Members {
		for _, q := range m.Queues {
			if q.Topic != "t" {
				continue
			}
			if o, ok := owner[q]; ok {
				t.Fatalf("queue %s assigned to %s and %s", q, o, m.ID)
			}
			owner[q] = m.ID
			got[m.ID]++
		}
	}
	for id, n := range want {
		if got[id] != n {
			t.Fatalf("assignment %v, want %v", got, want)
		}
	}
}

// A member that dies mid-batch (Close with handlers that do not finish)
// loses nothing: its queues resume from the committed offsets elsewhere.
// Only messages it held when it died are delivered twice.
func TestClusteringAtLeastOnceWhenAMemberDies(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 8)
	cnt := newCounter(clusterMessages)
	const span, pullBatch = 64, 16
	o := Options{ConsumeFromWhere: ConsumeFromFirstOffset, Goroutines: 4, ConsumeBatchSize: 4,
		QueueCacheCount: 64, ConsumeMaxSpan: span, PullBatchSize: pullBatch}
	// a dies once it has handled 2,000 messages itself, decided in its
	// handler: its share of the first 40,000 is about 13,000, so it dies
	// mid-stream however the goroutines are scheduled (a flag set by the
	// test once 10,000 were counted could come after a had finished).
	var handled atomic.Int64
	blocked := make(chan struct{}, 64)
	o.InstanceName = "a"
	a := e.push("g", o, "t", func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
		if handled.Load() >= 2_000 {
			cnt.add("a", msgs)
			blocked <- struct{}{}
			<-ctx.Done() // "crashes" before acknowledging
			return ReconsumeLater
		}
		cnt.add("a", msgs)
		handled.Add(int64(len(msgs)))
		return ConsumeSuccess
	})
	var others []*PushConsumer
	for _, id := range []string{"b", "c"} {
		o.InstanceName = id
		others = append(others, e.push("g", o, "t", cnt.handler(id)))
	}
	e.st.putMany("t", 40_000, "m")
	waitFor(t, blocked, "a blocked handler")
	aQueues := len(a.Assignment())
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	e.st.putMany("t", 60_000, "n")
	waitFor(t, cnt.done, "100k messages")
	for _, c := range others {
		if err := c.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	distinct, dups := cnt.dups()
	if distinct != clusterMessages {
		t.Fatalf("lost messages: %d distinct of %d", distinct, clusterMessages)
	}
	cnt.mu.Lock()
	defer cnt.mu.Unlock()
	for body, n := range cnt.seen {
		if n > 1 && cnt.first[body] != "a" {
			t.Fatalf("%s delivered %d times, first to %s: only the dead member's messages may repeat", body, n, cnt.first[body])
		}
	}
	// A redelivered message was cached by a: within ConsumeMaxSpan (plus a
	// pull batch) of the lowest unacked offset of one of a's queues.
	if limit := aQueues * (span + pullBatch); dups > limit {
		t.Fatalf("%d duplicates, more than %d", dups, limit)
	}
	t.Logf("duplicates after the crash: %d (limit %d)", dups, aQueues*(span+pullBatch))
}

// Broadcasting: every member receives every message exactly once, and
// keeps its own progress.
func TestBroadcastingEveryMemberEveryMessage(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 4)
	const n = 2000
	var cnts []*counter
	var cs []*PushConsumer
	for i := range 3 {
		cnt := newCounter(n)
		cnts = append(cnts, cnt)
		id := fmt.Sprintf("node%d", i)
		cs = append(cs, e.push("b", Options{Model: Broadcasting, InstanceName: id, ConsumeFromWhere: ConsumeFromFirstOffset}, "t", cnt.handler(id)))
	}
	e.st.putMany("t", n, "m")
	for i, cnt := range cnts {
		waitFor(t, cnt.done, fmt.Sprintf("member %d", i))
	}
	for _, c := range cs {
		if err := c.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for i, cnt := range cnts {
		if d, dups := cnt.dups(); d != n || dups != 0 {
			t.Fatalf("member %d: %d distinct, %d duplicates", i, d, dups)
		}
		for q := range 4 {
			if got := e.committed("b", fmt.Sprintf("node%d", i), "t", q); got != n/4 {
				t.Fatalf("member %d queue %d committed %d", i, q, got)
			}
		}
	}
	// Two live members may not share an instance name.
	c, err := e.mg.NewPushConsumer("b", Options{Model: Broadcasting, InstanceName: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("t", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(newCounter(1).handler("x")); err != nil {
		t.Fatal(err)
	}
	dup, _ := e.mg.NewPushConsumer("b", Options{Model: Broadcasting, InstanceName: "x"})
	_ = dup.Subscribe("t", nil)
	isErr(t, dup.Start(newCounter(1).handler("x")), ErrInvalidArgument, "duplicate instance name")
	// Nor mix models.
	cl, _ := e.mg.NewPushConsumer("b", Options{})
	_ = cl.Subscribe("t", nil)
	isErr(t, cl.Start(newCounter(1).handler("y")), ErrInvalidArgument, "clustering member in a broadcasting group")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// Pull consumers in a clustering group with AutoCommit: members joining
// and leaving mid-stream neither lose nor repeat a message (the leaving
// member commits what it polled before its queues move).
func TestPullClusteringAcrossRebalance(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 8)
	const total = 20_000
	cnt := newCounter(total)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type poller struct {
		c    *PullConsumer
		done chan struct{}
	}
	start := func(id string) poller {
		c := e.pull("g", Options{InstanceName: id, AutoCommit: true, ConsumeFromWhere: ConsumeFromFirstOffset}, "t")
		p := poller{c, make(chan struct{})}
		go func() {
			defer close(p.done)
			for {
				msgs, err := c.Poll(ctx, 16)
				if err != nil {
					return
				}
				cnt.add(id, msgs)
			}
		}()
		return p
	}
	ps := []poller{start("a"), start("b"), start("c")}
	e.st.putMany("t", total/2, "m")
	waitFor(t, cnt.atLeast(total/4), "a quarter")
	ps = append(ps, start("d"))
	assertAssignment(t, e.mg, "g", map[string]int{"a": 2, "b": 2, "c": 2, "d": 2})
	waitFor(t, cnt.atLeast(total/3), "a third")
	// a leaves: its poller must stop polling before Close commits, as an
	// application would stop its loop first.
	if err := ps[0].c.Close(); err != nil {
		t.Fatal(err)
	}
	<-ps[0].done
	e.st.putMany("t", total/2, "n")
	waitFor(t, cnt.done, "every message")
	cancel()
	for _, p := range ps[1:] {
		<-p.done
		if err := p.c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if d, dups := cnt.dups(); d != total || dups != 0 {
		t.Fatalf("%d distinct of %d, %d duplicates", d, total, dups)
	}
}
