package mqlite

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// short is an event without its times, IDs and member, for comparison.
func short(e TraceEvent) string {
	s := fmt.Sprintf("%s %s:%d@%d", e.Type, e.Topic, e.Queue, e.Offset)
	if e.Group != "" {
		s += " " + e.Group
	}
	if e.Attempt != 0 {
		s += fmt.Sprintf(" attempt=%d", e.Attempt)
	}
	if e.Level != 0 {
		s += fmt.Sprintf(" level=%d delay=%s", e.Level, e.Delay)
	}
	return s
}

// TestMessageTraceRetryDeadRedrive: a message failed by a push consumer,
// retried twice, dead-lettered, re-driven and consumed: Trace of its first
// ID (and of its dead letter's) returns every step in order, with the
// groups, levels and offsets.
func TestMessageTraceRetryDeadRedrive(t *testing.T) {
	clk := clock.NewFake(t0)
	sig := make(chan string, 4)
	s, err := openFS(vfs.NewMem(), "/t", smallFiles(&Options{Clock: clk, SegmentSize: 1 << 20, MessageTrace: true,
		Hooks: Hooks{Retry: func(RetryEvent) { sig <- "retry" }, DeadLetter: func(RetryEvent) { sig <- "dead" }}}))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 1}))
	ctx := context.Background()
	r, err := s.Put(ctx, &Message{Topic: "orders", Body: []byte("pay")}, 0)
	require.NoError(t, err)
	first := r.UniqKey()

	done := make(chan struct{})
	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, MaxReconsumeTimes: 2})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("orders", nil))
	require.NoError(t, c.Start(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		if msgs[0].UniqKey == first {
			return ReconsumeLater
		}
		close(done)
		return ConsumeSuccess
	}))
	require.Equal(t, "retry", <-sig)
	clk.Advance(10 * time.Second)
	require.Equal(t, "retry", <-sig)
	clk.Advance(30 * time.Second)
	require.Equal(t, "dead", <-sig)
	require.NoError(t, s.WaitVisible(ctx))
	dead, err := s.DeadLetters("g", 0, 1)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	_, err = s.Redrive(ctx, "g", dead[0].MsgID)
	require.NoError(t, err)
	<-done
	require.NoError(t, c.Shutdown(ctx))
	require.NoError(t, s.WaitVisible(ctx))

	want := []string{
		"stored orders:0@0",
		"sent orders:0@0",
		"delivered orders:0@0 g",
		"failed orders:0@0 g",
		"scheduled SCHEDULE_TOPIC_XXXX:0@-1 attempt=1",
		"retried orders:0@0 g attempt=1 level=3 delay=10s",
		"stored %RETRY%g:0@0 attempt=1",
		"delivered %RETRY%g:0@0 g attempt=1",
		"failed %RETRY%g:0@0 g attempt=1",
		"scheduled SCHEDULE_TOPIC_XXXX:0@-1 attempt=2",
		"retried %RETRY%g:0@0 g attempt=2 level=4 delay=30s",
		"stored %RETRY%g:0@1 attempt=2",
		"delivered %RETRY%g:0@1 g attempt=2",
		"failed %RETRY%g:0@1 g attempt=2",
		"stored %DLQ%g:0@0 attempt=2",
		"dead-lettered %RETRY%g:0@1 g attempt=2",
		"stored orders:0@1",
		"redriven orders:0@1 g",
		"delivered orders:0@1 g",
		"consumed orders:0@1 g",
	}
	for _, id := range []string{r.MsgID(), dead[0].MsgID} {
		evs, err := s.Trace(id)
		require.NoError(t, err)
		got := make([]string, len(evs))
		for i, e := range evs {
			got[i] = short(e)
		}
		require.Equal(t, want, got, "trace of %s", id)
		for _, e := range evs {
			if e.Type == TraceDelivered || e.Type == TraceConsumed || e.Type == TraceFailed {
				require.NotEmpty(t, e.Member, e.String())
			}
			require.False(t, e.Time.IsZero())
		}
	}
	_, err = s.Trace("0000000000000001")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = s.Trace("nope")
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// TestMessageTraceOff: without Options.MessageTrace nothing is recorded
// and Trace says so.
func TestMessageTraceOff(t *testing.T) {
	s, err := Open("/t", &Options{InMemory: true})
	require.NoError(t, err)
	defer s.Close()
	r, err := s.Put(context.Background(), &Message{Topic: "orders", Body: []byte("x")}, 0)
	require.NoError(t, err)
	_, err = s.Trace(r.MsgID())
	require.ErrorIs(t, err, ErrNotFound)
	require.Zero(t, s.topics.Queues(TraceTopic))
}

// TestMessageTraceFlushSync: with FlushSync (which shows readers synced
// records only) the trace records become visible without another send.
func TestMessageTraceFlushSync(t *testing.T) {
	s, err := Open(t.TempDir(), &Options{Flush: FlushSync, MessageTrace: true, SegmentSize: 1 << 20})
	require.NoError(t, err)
	defer s.Close()
	r, err := s.Put(context.Background(), &Message{Topic: "orders", Body: []byte("x")}, 0)
	require.NoError(t, err)
	var evs []TraceEvent
	// No WaitVisible: the store's own syncs must cover them. The "sent"
	// record is appended after the send's own sync; without the sync it
	// starts, it stayed invisible once the group commit had stopped
	// gathering (seen under load), so this loop is bounded.
	deadline := time.Now().Add(30 * time.Second)
	for len(evs) < 2 {
		require.True(t, time.Now().Before(deadline), "trace records still not visible: %v", evs)
		evs, err = s.Trace(r.MsgID())
		if err != nil {
			require.ErrorIs(t, err, ErrNotFound)
		}
		runtime.Gosched()
	}
	require.Len(t, evs, 2)
	require.Equal(t, TraceSent, evs[1].Type)
}

// TestProducerGroupNamesTheSender: a producer's Group is the sent step's
// group in the trace and SendEvent.Producer in its hooks; a Store's own
// Put has none; a bad Group is refused.
func TestProducerGroupNamesTheSender(t *testing.T) {
	ctx := context.Background()
	var producers []string
	s, err := Open("/t", &Options{InMemory: true, MessageTrace: true,
		Hooks: Hooks{AfterSend: func(_ context.Context, e SendEvent) { producers = append(producers, e.Producer) }}})
	require.NoError(t, err)
	defer s.Close()
	p, err := s.NewProducer(ProducerOptions{Group: "billing-svc"})
	require.NoError(t, err)
	defer p.Close()
	r, err := p.Send(ctx, &Message{Topic: "orders", Body: []byte("x")})
	require.NoError(t, err)
	_, err = p.SendBatch(ctx, []*Message{{Topic: "orders", Body: []byte("y")}})
	require.NoError(t, err)
	plain, err := s.Put(ctx, &Message{Topic: "orders", Body: []byte("z")}, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"billing-svc", "billing-svc", ""}, producers)
	require.NoError(t, s.WaitVisible(ctx))

	sent := func(id string) TraceEvent {
		t.Helper()
		evs, err := s.Trace(id)
		require.NoError(t, err)
		for _, e := range evs {
			if e.Type == TraceSent {
				return e
			}
		}
		t.Fatalf("no sent step for %s in %v", id, evs)
		return TraceEvent{}
	}
	require.Equal(t, "billing-svc", sent(r.MsgID()).Group)
	require.Empty(t, sent(plain.MsgID()).Group)

	for _, bad := range []string{"has space", string(make([]byte, 200))} {
		_, err = s.NewProducer(ProducerOptions{Group: bad})
		require.ErrorIs(t, err, ErrInvalidArgument, bad)
	}
}
