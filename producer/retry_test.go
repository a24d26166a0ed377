package producer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// scriptSink answers each Send and SendBatch with the next error of sends
// (nil: stored) and each AwaitDurable with the next of awaits; its
// timers run on a fake clock and announce themselves on timers.
type scriptSink struct {
	countingSink
	mu     sync.Mutex
	sends  []error
	awaits []error
	calls  int
	waited int
	clk    *clock.Fake
	timers chan time.Duration
}

func (s *scriptSink) next() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.sends) == 0 {
		return nil
	}
	err := s.sends[0]
	s.sends = s.sends[1:]
	return err
}

// Send stores (or fails with the next scripted error), then waits for
// durability as the store's Sink does.
func (s *scriptSink) Send(ctx context.Context, m *message.Message, _ *Options, _ *Picker, w Wait) (message.PutResult, error) {
	if err := s.next(); err != nil {
		return message.PutResult{}, err
	}
	r := message.PutResult{Size: 10, Offset: 100}
	if w == WaitDurable {
		return r, s.AwaitDurable(ctx, r.End())
	}
	return r, nil
}

func (s *scriptSink) SendBatch(ctx context.Context, msgs []*message.Message, _ *Options, _ *Picker) ([]message.PutResult, error) {
	if err := s.next(); err != nil {
		return nil, err
	}
	rs := make([]message.PutResult, len(msgs))
	for i := range rs {
		rs[i] = message.PutResult{Size: 10, Offset: int64(100 + 10*i)}
	}
	return rs, s.AwaitDurable(ctx, rs[len(rs)-1].End())
}

func (s *scriptSink) AwaitDurable(context.Context, int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waited++
	if len(s.awaits) == 0 {
		return nil
	}
	err := s.awaits[0]
	s.awaits = s.awaits[1:]
	return err
}

func (s *scriptSink) Expect(string, chan<- *message.MessageExt) error { return nil }
func (s *scriptSink) Forget(string) bool                              { return true }
func (s *scriptSink) NewTimer(d time.Duration) clock.Timer {
	t := s.clk.NewTimer(d)
	s.timers <- d
	return t
}

func newScript(t *testing.T, o Options, sends, awaits []error) (*Producer, *scriptSink) {
	st := &scriptSink{countingSink: countingSink{t: t}, sends: sends, awaits: awaits,
		clk: clock.NewFake(time.Unix(0, 0)), timers: make(chan time.Duration, 8)}
	p, err := New(st, o)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p, st
}

// TestRetryFlowControl: a refused send is tried again after a backoff that
// doubles, on the store's clock; past the limit the error returns.
func TestRetryFlowControl(t *testing.T) {
	fc := errs.ErrFlowControl
	p, st := newScript(t, Options{}, []error{fc, fc}, nil)
	done := make(chan error, 1)
	go func() {
		_, err := p.Send(context.Background(), &message.Message{Topic: "t", Body: []byte("x")})
		done <- err
	}()
	for _, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		require.Equal(t, want, <-st.timers)
		st.clk.Advance(want)
	}
	require.NoError(t, <-done)
	require.Equal(t, 3, st.calls)
	require.Equal(t, int64(2), p.Retried())

	p, st = newScript(t, Options{RetryTimesWhenSendFailed: 1, RetryBackoff: time.Second}, []error{fc, fc, fc}, nil)
	go func() {
		_, err := p.SendBatch(context.Background(), []*message.Message{{Topic: "t", Body: []byte("x")}})
		done <- err
	}()
	require.Equal(t, time.Second, <-st.timers)
	st.clk.Advance(time.Second)
	require.ErrorIs(t, <-done, errs.ErrFlowControl)
	require.Equal(t, 2, st.calls, "one retry")

	p, st = newScript(t, Options{RetryTimesWhenSendFailed: -1}, []error{fc}, nil)
	_, err := p.Send(context.Background(), &message.Message{Topic: "t", Body: []byte("x")})
	require.ErrorIs(t, err, errs.ErrFlowControl)
	require.Equal(t, 1, st.calls, "no retries")

	// Another error is not retried; a ctx that ends stops the backoff.
	p, st = newScript(t, Options{}, []error{errs.ErrDiskFull}, nil)
	_, err = p.Send(context.Background(), &message.Message{Topic: "t", Body: []byte("x")})
	require.ErrorIs(t, err, errs.ErrDiskFull)
	require.Equal(t, 1, st.calls)
	p, st = newScript(t, Options{}, []error{fc}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := p.Send(ctx, &message.Message{Topic: "t", Body: []byte("x")})
		done <- err
	}()
	<-st.timers
	cancel()
	require.ErrorIs(t, <-done, errs.ErrFlowControl)
	require.Equal(t, 1, st.calls)
}

// TestRetryFlushTimeout: a stored message whose sync timed out is waited
// for again, never stored again.
func TestRetryFlushTimeout(t *testing.T) {
	ft := errs.ErrFlushTimeout
	p, st := newScript(t, Options{}, nil, []error{ft})
	res, err := p.Send(context.Background(), &message.Message{Topic: "t", Body: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, SendOK, res.Status)
	require.Equal(t, int64(100), res.Offset)
	require.Equal(t, 1, st.calls, "stored once")
	require.Equal(t, 2, st.waited)

	p, st = newScript(t, Options{}, nil, []error{ft, ft, ft})
	res, err = p.Send(context.Background(), &message.Message{Topic: "t", Body: []byte("x")})
	require.ErrorIs(t, err, errs.ErrFlushTimeout)
	require.Equal(t, FlushDiskTimeout, res.Status)
	require.Equal(t, 1, st.calls)
	require.Equal(t, 3, st.waited, "the first wait and two retries")

	p, st = newScript(t, Options{}, nil, []error{ft})
	rs, err := p.SendBatch(context.Background(), []*message.Message{{Topic: "t", Body: []byte("x")}, {Topic: "t", Body: []byte("y")}})
	require.NoError(t, err)
	require.Len(t, rs, 2)
	require.Equal(t, SendOK, rs[1].Status)
	require.Equal(t, 1, st.calls)
	require.Equal(t, int64(1), p.Retried())
}
