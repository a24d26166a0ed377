package producer

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// replyStore is a Store with Replies whose Append can answer at once.
type replyStore struct {
	clk     *clock.Fake
	onStore func(m *message.Message) // called by Append, after storing
	mu      sync.Mutex
	waiting map[string]chan<- *message.MessageExt
	stored  int
}

func (s *replyStore) Validate(m *message.Message) error {
	return message.Validate(m, 0, message.MaxTopicLen, 20, s.clk.Now())
}
func (s *replyStore) QueueCount(string, int) (int, error) { return 1, nil }
func (s *replyStore) Append(m *message.Message, q int) (message.PutResult, error) {
	s.mu.Lock()
	s.stored++
	s.mu.Unlock()
	if s.onStore != nil {
		s.onStore(m)
	}
	return message.NewPutResult(0, 100, q, 0, s.clk.Now(), m.UniqKey, nil), nil
}
func (s *replyStore) AppendBatch([]*message.Message, int) ([]message.PutResult, error) {
	return nil, errs.ErrInvalidArgument
}
func (s *replyStore) AwaitDurable(context.Context, int64) error { return nil }
func (s *replyStore) Kick(int64)                                {}

func (s *replyStore) Expect(id string, ch chan<- *message.MessageExt) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting == nil {
		s.waiting = map[string]chan<- *message.MessageExt{}
	}
	s.waiting[id] = ch
	return nil
}
func (s *replyStore) Forget(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.waiting[id]
	delete(s.waiting, id)
	return ok
}
func (s *replyStore) NewTimer(d time.Duration) clock.Timer { return s.clk.NewTimer(d) }

// route answers the request with correlation id, if still waiting.
func (s *replyStore) route(id string, body string) bool {
	s.mu.Lock()
	ch, ok := s.waiting[id]
	delete(s.waiting, id)
	s.mu.Unlock()
	if ok {
		ch <- &message.MessageExt{Message: message.Message{Body: []byte(body)}}
	}
	return ok
}

// TestRequestReplyWinsRace: a reply routed while the request gives up
// (ctx cancelled at the same moment) is returned, never lost: whichever
// case the wait picks, a routed reply is the result.
func TestRequestReplyWinsRace(t *testing.T) {
	for range 50 {
		st := &replyStore{clk: clock.NewFake(time.Unix(1e9, 0))}
		p, err := New(st, Options{})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		st.onStore = func(m *message.Message) {
			require.True(t, st.route(m.Properties[message.PropCorrelationID], "re"))
			cancel()
		}
		rep, err := p.Request(ctx, &message.Message{Topic: "t", Body: []byte("x")})
		require.NoError(t, err)
		require.Equal(t, "re", string(rep.Body))
		require.Empty(t, st.waiting)
		require.NoError(t, p.Close())
	}
}

// TestRequestTimerAndStoreErrors: the timer is measured on the store's
// clock from Options.RequestTimeout; a send error leaves nothing pending;
// a Store without Replies refuses requests.
func TestRequestTimerAndStoreErrors(t *testing.T) {
	st := &replyStore{clk: clock.NewFake(time.Unix(1e9, 0))}
	p, err := New(st, Options{RequestTimeout: time.Minute})
	require.NoError(t, err)
	defer p.Close()
	done := make(chan error, 1)
	stored := make(chan string, 1)
	st.onStore = func(m *message.Message) { stored <- m.Properties[message.PropTTL] }
	require.NoError(t, p.RequestAsync(context.Background(), &message.Message{Topic: "t", Body: []byte("x")},
		func(m *message.MessageExt, err error) { done <- err }))
	require.Equal(t, "60000", <-stored)
	st.clk.Advance(time.Minute)
	require.ErrorIs(t, <-done, ErrRequestTimeout)
	require.Empty(t, st.waiting)

	st.onStore = nil
	_, err = p.Request(context.Background(), &message.Message{Topic: "", Body: []byte("x")})
	require.ErrorIs(t, err, message.ErrInvalidTopic)
	require.Empty(t, st.waiting)
	require.Equal(t, 1, st.stored)

	plain, err := New(plainStore{st}, Options{})
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.Request(context.Background(), &message.Message{Topic: "t", Body: []byte("x")})
	require.ErrorIs(t, err, errs.ErrInvalidArgument)
	require.Equal(t, 1, st.stored)
}

// plainStore hides Replies.
type plainStore struct{ Store }

// TestRequestAsyncBoundedByMaxInFlight: pending requests count against
// MaxInFlight; at the bound RequestAsync waits for a reply, ends with its
// ctx storing nothing, and fails with ErrClosed after Close.
func TestRequestAsyncBoundedByMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &replyStore{clk: clock.NewFake(time.Unix(1e9, 0))}
		p, err := New(st, Options{MaxInFlight: 2})
		require.NoError(t, err)
		ids := make(chan string, 8)
		st.onStore = func(m *message.Message) { ids <- m.Properties[message.PropCorrelationID] }
		replies := make(chan string, 8)
		cb := func(m *message.MessageExt, err error) {
			if err != nil {
				replies <- err.Error()
				return
			}
			replies <- string(m.Body)
		}
		msg := &message.Message{Topic: "t", Body: []byte("x")}
		require.NoError(t, p.RequestAsync(context.Background(), msg, cb))
		require.NoError(t, p.RequestAsync(context.Background(), msg, cb))
		first := <-ids
		<-ids

		third := make(chan error, 1)
		go func() { third <- p.RequestAsync(context.Background(), msg, cb) }()
		synctest.Wait()
		require.Empty(t, third, "the third request waits at the bound")
		require.Equal(t, 2, st.stored)

		require.True(t, st.route(first, "one"))
		require.NoError(t, <-third)
		require.Equal(t, "one", <-replies)
		require.Equal(t, 3, st.stored)

		ctx, cancel := context.WithCancel(context.Background())
		fourth := make(chan error, 1)
		go func() { fourth <- p.RequestAsync(ctx, msg, cb) }()
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-fourth, context.Canceled)
		require.Equal(t, 3, st.stored, "a request that gave up stored nothing")

		require.NoError(t, p.Close())
		for range 2 {
			require.Contains(t, <-replies, errs.ErrClosed.Error())
		}
		require.ErrorIs(t, p.RequestAsync(context.Background(), msg, cb), errs.ErrClosed)
		require.Equal(t, 3, st.stored)
	})
}
