package consumer

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
)

func bodies(msgs []*message.MessageExt) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Body))
	}
	return out
}

// A Poll blocked on an empty queue returns as soon as a message is stored,
// with no (virtual) time passing; a cancelled ctx returns at once.
func TestPullLongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 2)
		c := e.pull("g", Options{}, "t")
		start := time.Now()
		got := make(chan []*message.MessageExt)
		go func() {
			msgs, err := c.Poll(context.Background(), 10)
			if err != nil {
				t.Error(err)
			}
			got <- msgs
		}()
		synctest.Wait() // Poll and the fetchers are blocked
		select {
		case <-got:
			t.Fatal("Poll returned on an empty queue")
		default:
		}
		e.st.put("t", 1, "", "hello")
		msgs := <-got
		if len(msgs) != 1 || string(msgs[0].Body) != "hello" {
			t.Fatalf("Poll = %v", bodies(msgs))
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("%s of virtual time passed: Poll was not woken by the store", d)
		}

		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() {
			_, err := c.Poll(ctx, 10)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		isErr(t, <-errc, context.Canceled, "Poll after cancel")

		ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := c.Poll(ctx, 10)
		isErr(t, err, context.DeadlineExceeded, "Poll with a deadline")
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		_, err = c.Poll(context.Background(), 1)
		isErr(t, err, ErrClosed, "Poll after Close")
	})
}

// Close wakes a blocked Poll with ErrClosed.
func TestPullCloseWakesPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 1)
		c := e.pull("g", Options{}, "t")
		errc := make(chan error)
		go func() {
			_, err := c.Poll(context.Background(), 1)
			errc <- err
		}()
		synctest.Wait()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		isErr(t, <-errc, ErrClosed, "blocked Poll at Close")
	})
}

func TestPullCommitSeek(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 1)
	for i := range 10 {
		e.st.put("t", 0, "", fmt.Sprint(i))
	}
	c := e.pull("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset, PullBatchSize: 4}, "t")
	ctx := context.Background()
	msgs, err := c.Poll(ctx, 3)
	if err != nil || len(msgs) != 3 || string(msgs[0].Body) != "0" {
		t.Fatalf("Poll = %v, %v", bodies(msgs), err)
	}
	if pos, _ := c.Position("t", 0); pos != 3 {
		t.Fatalf("Position %d, want 3", pos)
	}
	// Nothing is committed until asked (AutoCommit off), beyond the start.
	if got := e.committed("g", "", "t", 0); got != 0 {
		t.Fatalf("committed %d before Commit", got)
	}
	// Bad commits change nothing.
	isErr(t, c.CommitOffset("t", 0, 4), ErrInvalidArgument, "commit past what was delivered")
	isErr(t, c.CommitOffset("t", 0, -1), ErrInvalidArgument, "negative commit")
	isErr(t, c.CommitOffset("t", 1, 1), ErrNotFound, "commit of a queue not held")
	isErr(t, c.CommitOffset("nope", 0, 1), ErrNotFound, "commit of an unknown topic")
	if got := e.committed("g", "", "t", 0); got != 0 {
		t.Fatalf("a refused commit changed the offset to %d", got)
	}
	if err := c.CommitOffset("t", 0, 2); err != nil {
		t.Fatal(err)
	}
	if got := e.committed("g", "", "t", 0); got != 2 {
		t.Fatalf("committed %d, want 2", got)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := e.committed("g", "", "t", 0); got != 3 {
		t.Fatalf("committed %d, want 3", got)
	}
	// Seek.
	isErr(t, c.Seek("t", 0, -1), ErrInvalidArgument, "seek to a negative offset")
	isErr(t, c.Seek("t", 0, 11), ErrInvalidArgument, "seek past max")
	isErr(t, c.Seek("t", 5, 1), ErrNotFound, "seek of a queue not held")
	if pos, _ := c.Position("t", 0); pos != 3 {
		t.Fatalf("a refused seek moved the position to %d", pos)
	}
	if err := c.Seek("t", 0, 8); err != nil {
		t.Fatal(err)
	}
	msgs, _ = c.Poll(ctx, 10)
	if got := bodies(msgs); len(got) != 2 || got[0] != "8" || got[1] != "9" {
		t.Fatalf("after seek to 8: %v", got)
	}
	if err := c.Seek("t", 0, 1); err != nil { // backwards
		t.Fatal(err)
	}
	msgs, _ = c.Poll(ctx, 2)
	if got := bodies(msgs); len(got) != 2 || got[0] != "1" {
		t.Fatalf("after seek to 1: %v", got)
	}
	if got := e.committed("g", "", "t", 0); got != 3 {
		t.Fatalf("Seek committed: %d", got)
	}
	// Bad input.
	_, err = c.Poll(ctx, 0)
	isErr(t, err, ErrInvalidArgument, "Poll max 0")
	_, err = c.Poll(ctx, -3)
	isErr(t, err, ErrInvalidArgument, "Poll max -3")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// Seek interrupts a Poll's fetcher blocked at the end of the queue.
func TestPullSeekWhileBlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 1)
		for i := range 3 {
			e.st.put("t", 0, "", fmt.Sprint(i))
		}
		c := e.pull("g", Options{}, "t") // starts at the end: 3
		synctest.Wait()
		if err := c.Seek("t", 0, 0); err != nil {
			t.Fatal(err)
		}
		msgs, err := c.Poll(context.Background(), 10)
		if err != nil || len(bodies(msgs)) != 3 {
			t.Fatalf("Poll after seek back = %v, %v", bodies(msgs), err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPullSeekToTime(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnv(t, fake)
	e.st.createTopic("t", 2)
	for i := range 6 {
		e.st.put("t", i%2, "", fmt.Sprint(i))
		fake.Advance(time.Second)
	}
	c := e.pull("g", Options{}, "t")
	if err := c.SeekToTime(time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < 4 {
		msgs, err := c.Poll(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies(msgs) {
			got[b] = true
		}
	}
	for _, b := range []string{"2", "3", "4", "5"} {
		if !got[b] {
			t.Fatalf("SeekToTime: got %v", got)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// AutoCommit commits what earlier Polls returned at the next Poll, and on
// Close.
func TestPullAutoCommit(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 1)
	for i := range 10 {
		e.st.put("t", 0, "", fmt.Sprint(i))
	}
	c := e.pull("g", Options{AutoCommit: true, ConsumeFromWhere: ConsumeFromFirstOffset}, "t")
	ctx := context.Background()
	if msgs, _ := c.Poll(ctx, 4); len(msgs) != 4 {
		t.Fatal("short poll")
	}
	if got := e.committed("g", "", "t", 0); got != 0 {
		t.Fatalf("committed %d before the next Poll", got)
	}
	if msgs, _ := c.Poll(ctx, 4); len(msgs) != 4 {
		t.Fatal("short poll")
	}
	if got := e.committed("g", "", "t", 0); got != 4 {
		t.Fatalf("committed %d, want 4", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := e.committed("g", "", "t", 0); got != 8 {
		t.Fatalf("committed %d after Close, want 8", got)
	}
	// A new consumer of the group resumes at 8.
	c2 := e.pull("g", Options{AutoCommit: true}, "t")
	msgs, _ := c2.Poll(ctx, 10)
	if got := bodies(msgs); len(got) != 2 || got[0] != "8" {
		t.Fatalf("resumed with %v", got)
	}
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
}

// Filters are applied by the store; filtered-out messages still advance
// the position and the committed offset.
func TestPullFilterAdvancesOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 1)
		for i := range 10 {
			tag := "b"
			if i == 2 || i == 5 {
				tag = "a"
			}
			e.st.put("t", 0, tag, fmt.Sprint(i))
		}
		c, _ := e.mg.NewPullConsumer("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset})
		if err := c.Subscribe("t", tagFilter{[]string{"a"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the fetcher examined the whole queue
		msgs, err := c.Poll(context.Background(), 10)
		if got := bodies(msgs); len(got) != 2 || got[0] != "2" || got[1] != "5" {
			t.Fatalf("filtered poll = %v, %v", got, err)
		}
		if pos, _ := c.Position("t", 0); pos != 10 {
			t.Fatalf("position %d, want 10", pos)
		}
		if err := c.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := e.committed("g", "", "t", 0); got != 10 {
			t.Fatalf("committed %d, want 10", got)
		}
		gi, _ := e.mg.Group("g")
		if len(gi.Subscriptions) != 1 || gi.Subscriptions[0].Expression != "a" || gi.Subscriptions[0].FilterType != "TAG" {
			t.Fatalf("persisted subscription %+v", gi.Subscriptions)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Manually assigned queues: no rebalance, the group's offsets.
func TestPullAssign(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 4)
	for q := range 4 {
		e.st.put("t", q, "", fmt.Sprintf("q%d", q))
	}
	c, _ := e.mg.NewPullConsumer("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset})
	isErr(t, c.Assign("t", nil, 4), ErrInvalidArgument, "queue id out of range")
	isErr(t, c.Assign("t", nil, 1, 1), ErrInvalidArgument, "repeated queue id")
	isErr(t, c.Assign("nope", nil, 0), ErrTopicNotFound, "unknown topic")
	if err := c.Assign("t", nil, 1, 3); err != nil {
		t.Fatal(err)
	}
	isErr(t, c.Subscribe("t", nil), ErrInvalidArgument, "Subscribe after Assign")
	got := map[string]bool{}
	for len(got) < 2 {
		msgs, err := c.Poll(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies(msgs) {
			got[b] = true
		}
	}
	if !got["q1"] || !got["q3"] || len(got) != 2 {
		t.Fatalf("assigned queues 1, 3: got %v", got)
	}
	if a := c.Assignment(); len(a) != 2 || a[0] != (Queue{"t", 1}) || a[1] != (Queue{"t", 3}) {
		t.Fatalf("Assignment %v", a)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// ReconsumeLater hands the message to Source.SendBack.
func TestPullReconsumeLater(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 1)
	e.st.put("t", 0, "", "x")
	c := e.pull("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, "t")
	msgs, err := c.Poll(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ReconsumeLater(context.Background(), msgs[0]); err != nil {
		t.Fatal(err)
	}
	isErr(t, c.ReconsumeLater(context.Background(), nil), ErrInvalidArgument, "nil message")
	if sb := e.st.sentBack(); len(sb) != 1 || string(sb[0].Body) != "x" {
		t.Fatalf("sent back %v", sb)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	isErr(t, c.ReconsumeLater(context.Background(), msgs[0]), ErrClosed, "after Close")
}
