package mqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// replyFixture is a store on a fake clock with topic "req" (2 queues), a
// producer with a 5 s request timeout, and a push consumer whose handler
// is h.
func replyFixture(t *testing.T, h func(ctx context.Context, m *MessageExt)) (*Store, *clock.Fake, *Producer) {
	t.Helper()
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.CreateTopic("req", TopicConfig{Queues: 2}))
	p, err := s.NewProducer(ProducerOptions{RequestTimeout: 5 * time.Second})
	require.NoError(t, err)
	if h != nil {
		c, err := s.NewPushConsumer("replier", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
		require.NoError(t, err)
		require.NoError(t, c.Subscribe("req", nil))
		require.NoError(t, c.Start(func(ctx context.Context, ms []*MessageExt) ConsumeResult {
			for _, m := range ms {
				h(ctx, m)
			}
			return ConsumeSuccess
		}))
	}
	return s, clk, p
}

// echo answers every request with "re:" + its body.
func echo(t *testing.T, s *Store) func(context.Context, *MessageExt) {
	return func(ctx context.Context, m *MessageExt) {
		_, err := s.Reply(ctx, m, []byte("re:"+string(m.Body)))
		if err != nil {
			t.Errorf("reply to %s: %v", m.Body, err)
		}
	}
}

func requestStats(t *testing.T, s *Store) RequestStats {
	t.Helper()
	st, err := s.Stats()
	require.NoError(t, err)
	return st.Requests
}

// TestRequestReply: a push consumer's handler answers a request; Request
// returns that reply, which carries the request's correlation ID and is
// stored (durable, readable by ID and by key) in ReplyTopic; the request
// message carried the RocketMQ request properties; the caller's message
// is not modified.
func TestRequestReply(t *testing.T) {
	var mu sync.Mutex
	var seen []*MessageExt
	var s *Store
	s, _, p := replyFixture(t, func(ctx context.Context, m *MessageExt) {
		mu.Lock()
		seen = append(seen, m)
		mu.Unlock()
		echo(t, s)(ctx, m)
	})
	ctx := context.Background()
	req := &Message{Topic: "req", Body: []byte("ping"), Properties: map[string]string{"k": "v"}}
	rep, err := p.Request(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "re:ping", string(rep.Body))
	require.Equal(t, ReplyTopic, rep.Topic)
	require.Equal(t, ReplyMessageFlag, rep.Properties[PropMessageType])
	require.Equal(t, map[string]string{"k": "v"}, req.Properties, "the caller's message is not modified")

	mu.Lock()
	require.Len(t, seen, 1)
	got := seen[0]
	mu.Unlock()
	id := got.Properties[PropCorrelationID]
	require.NotEmpty(t, id)
	require.Equal(t, id, rep.Properties[PropCorrelationID])
	require.NotEmpty(t, got.Properties[PropReplyToClient])
	require.Equal(t, got.Properties[PropReplyToClient], rep.Properties[PropReplyToClient])
	require.Equal(t, "5000", got.Properties[PropTTL])
	require.Equal(t, "5000", rep.Properties[PropTTL])
	require.Equal(t, "v", got.Properties["k"])

	require.NoError(t, s.WaitVisible(ctx))
	stored, err := s.MessageByID(rep.MsgID)
	require.NoError(t, err)
	require.Equal(t, "re:ping", string(stored.Body))
	require.Equal(t, rep.CommitLogOffset, stored.CommitLogOffset)
	require.Equal(t, rep.QueueOffset, stored.QueueOffset)
	require.Equal(t, id, stored.Properties[PropCorrelationID])
	byKey, err := s.MessagesByKey(ReplyTopic, id, time.Time{}, t0.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, byKey, 1)
	require.Equal(t, RequestStats{Replies: 1}, requestStats(t, s))

	// A second reply to the same request finds nobody waiting: stored, counted late.
	_, err = s.Reply(ctx, got, []byte("again"))
	require.NoError(t, err)
	require.Equal(t, RequestStats{Replies: 1, LateReplies: 1}, requestStats(t, s))
}

// TestRequestTimeout: a request nobody answers ends with ErrRequestTimeout
// exactly when the fake clock passes RequestTimeout (or with ctx's error
// when ctx is cancelled); the reply that comes afterwards is stored,
// dropped and counted late, and nothing stays pending.
func TestRequestTimeout(t *testing.T) {
	for _, how := range []string{"clock", "cancel", "async-clock"} {
		t.Run(how, func(t *testing.T) {
			got := make(chan *MessageExt, 1)
			s, clk, p := replyFixture(t, func(_ context.Context, m *MessageExt) { got <- m })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			req := &Message{Topic: "req", Body: []byte("slow")}
			if how == "async-clock" {
				require.NoError(t, p.RequestAsync(ctx, req, func(m *MessageExt, err error) {
					if m != nil {
						err = fmt.Errorf("unexpected reply %q", m.Body)
					}
					done <- err
				}))
			} else {
				go func() {
					m, err := p.Request(ctx, req)
					if m != nil {
						err = fmt.Errorf("unexpected reply %q", m.Body)
					}
					done <- err
				}()
			}
			m := <-got // the request was stored, so its timer runs
			require.Equal(t, 1, requestStats(t, s).Pending)

			clk.Advance(5*time.Second - time.Millisecond)
			require.NoError(t, s.Settle(ctx))
			select {
			case err := <-done:
				t.Fatalf("request ended before its timeout: %v", err)
			default:
			}
			var err error
			if how == "cancel" {
				cancel()
				err = <-done
				require.ErrorIs(t, err, context.Canceled)
			} else {
				clk.Advance(time.Millisecond)
				err = <-done
				require.ErrorIs(t, err, ErrRequestTimeout)
				require.ErrorIs(t, err, context.DeadlineExceeded)
			}
			require.Equal(t, RequestStats{}, requestStats(t, s))

			res, err := s.Reply(context.Background(), m, []byte("late"))
			require.NoError(t, err)
			require.Equal(t, RequestStats{LateReplies: 1}, requestStats(t, s))
			require.NoError(t, s.WaitVisible(context.Background()))
			stored, err := s.ReadQueue(context.Background(), ReplyTopic, 0, 0, 10)
			require.NoError(t, err)
			require.Len(t, stored, 1)
			require.Equal(t, "late", string(stored[0].Body))
			require.Equal(t, res.Offset, stored[0].CommitLogOffset)
		})
	}
}

// TestRequestConcurrent: 200 requests at once, half sync and half async,
// each get the reply to their own body.
func TestRequestConcurrent(t *testing.T) {
	var s *Store
	s, _, p := replyFixture(t, func(ctx context.Context, m *MessageExt) { echo(t, s)(ctx, m) })
	ctx := context.Background()
	const n = 200
	errc := make(chan error, n)
	check := func(i int, m *MessageExt, err error) {
		if err == nil && string(m.Body) != fmt.Sprintf("re:%d", i) {
			err = fmt.Errorf("request %d got reply %q", i, m.Body)
		}
		errc <- err
	}
	for i := range n {
		body := []byte(fmt.Sprint(i))
		if i%2 == 0 {
			go func() {
				m, err := p.Request(ctx, &Message{Topic: "req", Body: body})
				check(i, m, err)
			}()
		} else {
			require.NoError(t, p.RequestAsync(ctx, &Message{Topic: "req", Body: body}, func(m *MessageExt, err error) { check(i, m, err) }))
		}
	}
	for range n {
		require.NoError(t, <-errc)
	}
	require.Equal(t, RequestStats{Replies: n}, requestStats(t, s))
	require.NoError(t, s.WaitVisible(ctx))
	stored, err := s.ReadQueue(ctx, ReplyTopic, 0, 0, 1000)
	require.NoError(t, err)
	require.Len(t, stored, n)
	ids := map[string]bool{}
	for _, m := range stored {
		ids[m.Properties[PropCorrelationID]] = true
	}
	require.Len(t, ids, n, "one correlation ID per request")
}

// TestRequestClose: a pending Request ends with ErrClosed when its
// producer closes, a pending RequestAsync's callback gets ErrClosed when
// the store closes, and both are forgotten.
func TestRequestClose(t *testing.T) {
	got := make(chan *MessageExt, 2)
	s, _, p := replyFixture(t, func(_ context.Context, m *MessageExt) { got <- m })
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := p.Request(ctx, &Message{Topic: "req", Body: []byte("a")})
		done <- err
	}()
	<-got
	require.NoError(t, p.Close())
	require.ErrorIs(t, <-done, ErrClosed)
	require.Equal(t, RequestStats{}, requestStats(t, s))

	p2, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	require.NoError(t, p2.RequestAsync(ctx, &Message{Topic: "req", Body: []byte("b")}, func(_ *MessageExt, err error) { done <- err }))
	<-got
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-done, ErrClosed)
}

// TestRequestReplyBadInput: every bad call returns a typed error and
// changes nothing: no byte written, no reply topic, nothing pending.
func TestRequestReplyBadInput(t *testing.T) {
	s, _, p := replyFixture(t, nil)
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()
	req := &MessageExt{Message: Message{Topic: "req", Body: []byte("x"),
		Properties: map[string]string{PropCorrelationID: "c1", PropReplyToClient: "p1"}}}
	reply := &MessageExt{Message: Message{Topic: ReplyTopic, Body: []byte("x"),
		Properties: map[string]string{PropCorrelationID: "c1", PropReplyToClient: "p1", PropMessageType: ReplyMessageFlag}}}
	plain := &MessageExt{Message: Message{Topic: "req", Body: []byte("x")}}
	var nilCtx context.Context
	cb := func(*MessageExt, error) { t.Error("callback of a refused request") }
	reply2 := func(ctx context.Context, m *MessageExt, body []byte) error {
		_, err := s.Reply(ctx, m, body)
		return err
	}
	wrote := s.log.WrotePosition()
	cases := []struct {
		name string
		err  error
		call func() error
	}{
		{"reply nil ctx", ErrInvalidArgument, func() error { return reply2(nilCtx, req, []byte("r")) }},
		{"reply done ctx", context.Canceled, func() error { return reply2(done, req, []byte("r")) }},
		{"reply nil request", ErrInvalidArgument, func() error { return reply2(ctx, nil, []byte("r")) }},
		{"reply to a plain message", ErrNotRequest, func() error { return reply2(ctx, plain, []byte("r")) }},
		{"reply to a reply", ErrNotRequest, func() error { return reply2(ctx, reply, []byte("r")) }},
		{"reply empty body", ErrEmptyBody, func() error { return reply2(ctx, req, nil) }},
		{"reply too large", ErrMessageTooLarge, func() error { return reply2(ctx, req, make([]byte, 5<<20)) }},
		{"request nil ctx", ErrInvalidArgument, func() error { _, err := p.Request(nilCtx, &Message{Topic: "req", Body: []byte("x")}); return err }},
		{"request done ctx", context.Canceled, func() error { _, err := p.Request(done, &Message{Topic: "req", Body: []byte("x")}); return err }},
		{"request nil message", ErrInvalidArgument, func() error { _, err := p.Request(ctx, nil); return err }},
		{"request empty body", ErrEmptyBody, func() error { _, err := p.Request(ctx, &Message{Topic: "req"}); return err }},
		{"request to a system topic", ErrInvalidTopic, func() error { _, err := p.Request(ctx, &Message{Topic: ReplyTopic, Body: []byte("x")}); return err }},
		{"request with a correlation ID", ErrInvalidProperty, func() error {
			_, err := p.Request(ctx, &Message{Topic: "req", Body: []byte("x"), Properties: map[string]string{PropCorrelationID: "mine"}})
			return err
		}},
		{"request with a TTL", ErrInvalidProperty, func() error {
			return p.RequestAsync(ctx, &Message{Topic: "req", Body: []byte("x"), Properties: map[string]string{PropTTL: "1"}}, cb)
		}},
		{"request async nil callback", ErrInvalidArgument, func() error { return p.RequestAsync(ctx, &Message{Topic: "req", Body: []byte("x")}, nil) }},
		{"request async nil ctx", ErrInvalidArgument, func() error { return p.RequestAsync(nilCtx, &Message{Topic: "req", Body: []byte("x")}, cb) }},
		{"negative request timeout", ErrInvalidArgument, func() error { _, err := s.NewProducer(ProducerOptions{RequestTimeout: -1}); return err }},
	}
	for _, c := range cases {
		err := c.call()
		require.ErrorIs(t, err, c.err, c.name)
		require.NotPanics(t, func() { _ = err.Error() }, c.name)
	}
	require.Equal(t, wrote, s.log.WrotePosition(), "bad input wrote nothing")
	require.Equal(t, RequestStats{}, requestStats(t, s))
	for _, ti := range s.Topics() {
		require.NotEqual(t, ReplyTopic, ti.Name, "bad input created the reply topic")
	}

	// Closed: the store, and a producer of it.
	require.NoError(t, s.Close())
	require.ErrorIs(t, reply2(ctx, req, []byte("r")), ErrClosed)
	_, err := p.Request(ctx, &Message{Topic: "req", Body: []byte("x")})
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, p.RequestAsync(ctx, &Message{Topic: "req", Body: []byte("x")}, cb), ErrClosed)
	var np *Producer
	_, err = np.Request(ctx, &Message{Topic: "req", Body: []byte("x")})
	require.ErrorIs(t, err, ErrInvalidArgument)
	var ns *Store
	_, err = ns.Reply(ctx, req, []byte("r"))
	require.ErrorIs(t, err, ErrInvalidArgument)
}
