package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
)

// offsetsHandler sends each message's queue offset to got.
func offsetsHandler(got chan<- int64) Handler {
	return func(_ context.Context, msgs []*message.MessageExt) ConsumeResult {
		for _, m := range msgs {
			got <- m.QueueOffset
		}
		return ConsumeSuccess
	}
}

// expectOffsets reads from..to-1 from got, in order.
func expectOffsets(t *testing.T, got <-chan int64, from, to int64) {
	t.Helper()
	for want := from; want < to; want++ {
		if off := waitFor(t, got, "a delivery"); off != want {
			t.Fatalf("delivered offset %d, want %d", off, want)
		}
	}
}

// A push consumer's Seek delivers the queue again from the offset, in
// order, and commits it; bad offsets, queues it does not hold and a
// closed consumer are refused.
func TestPushSeek(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 1)
	e.st.putMany("t", 10, "m")
	got := make(chan int64, 100)
	c := e.push("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset, Goroutines: 1}, "t", offsetsHandler(got))
	expectOffsets(t, got, 0, 10)

	isErr(t, c.Seek("t", 0, 11), ErrInvalidArgument, "Seek past the max")
	isErr(t, c.Seek("t", 0, -1), ErrInvalidArgument, "Seek below the min")
	isErr(t, c.Seek("t", 1, 0), ErrNotFound, "Seek of a queue the topic lacks")
	isErr(t, c.Seek("other", 0, 0), ErrNotFound, "Seek of another topic")
	if err := c.Seek("t", 0, 4); err != nil {
		t.Fatal(err)
	}
	expectOffsets(t, got, 4, 10)
	if err := c.SeekToTime(time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	expectOffsets(t, got, 0, 10)
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if off := e.committed("g", "", "t", 0); off != 10 {
		t.Fatalf("committed %d, want 10", off)
	}
	select {
	case off := <-got:
		t.Fatalf("offset %d delivered once more", off)
	default:
	}
	isErr(t, c.Seek("t", 0, 0), ErrClosed, "Seek after Shutdown")
	isErr(t, c.SeekToTime(time.Unix(0, 0)), ErrClosed, "SeekToTime after Shutdown")
}

// A handler call running when its queue is reset finishes, and its result
// no longer moves the committed offset: the queue starts again at the
// offset Seek committed once the call returned, not where the call left it.
func TestPushSeekRevokesRunningCall(t *testing.T) {
	for _, orderly := range []bool{false, true} {
		e := newEnv(t, clock.Real)
		e.st.createTopic("t", 1)
		e.st.putMany("t", 10, "m")
		blocked, release := make(chan struct{}), make(chan struct{})
		again, release2 := make(chan struct{}), make(chan struct{})
		got := make(chan int64, 100) // round 2's deliveries
		round := 0
		h := func(_ context.Context, msgs []*message.MessageExt) ConsumeResult {
			for _, m := range msgs { // one goroutine: no lock needed
				switch {
				case m.QueueOffset == 2 && round == 0:
					round = 1
					close(blocked)
					<-release
				case m.QueueOffset == 0 && round == 1:
					round = 2
					close(again)
					<-release2
				}
				if round == 2 {
					got <- m.QueueOffset
				}
			}
			return ConsumeSuccess
		}
		c := e.push("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset, Goroutines: 1, Orderly: orderly}, "t", h)
		waitFor(t, blocked, "the call at offset 2")
		if err := c.Seek("t", 0, 0); err != nil {
			t.Fatal(err)
		}
		if off := e.committed("g", "", "t", 0); off != 0 {
			t.Fatalf("orderly %v: committed %d after Seek, want 0", orderly, off)
		}
		close(release)
		waitFor(t, again, "offset 0 again")
		if off := e.committed("g", "", "t", 0); off != 0 {
			t.Fatalf("orderly %v: committed %d once the reset queue restarted, want 0 (the revoked call committed)", orderly, off)
		}
		close(release2)
		expectOffsets(t, got, 0, 10)
		if err := c.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if off := e.committed("g", "", "t", 0); off != 10 {
			t.Fatalf("orderly %v: committed %d at the end, want 10", orderly, off)
		}
	}
}
