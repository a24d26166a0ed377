package producer

import (
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// DefaultRequestTimeout is how long Request waits for a reply when
// Options.RequestTimeout is 0 (RocketMQ's default send timeout).
const DefaultRequestTimeout = 3 * time.Second

// ErrRequestTimeout: no reply within Options.RequestTimeout, measured on
// the store's clock. It matches context.DeadlineExceeded, as a ctx
// deadline does.
var ErrRequestTimeout = fmt.Errorf("mqlite/producer: request timed out: %w", context.DeadlineExceeded)

// Replies is what Request needs from a store besides Appender: somewhere to
// wait for a reply by correlation ID, and the store's clock. A store that
// does not implement it makes Request fail with ErrInvalidArgument.
type Replies interface {
	// Expect registers a pending request: a reply to correlation id is
	// sent to ch (capacity 1), once. An id already pending is an error.
	Expect(id string, ch chan<- *message.MessageExt) error
	// Forget removes the pending request id; false if its reply was
	// sent to its channel already.
	Forget(id string) bool
	// NewTimer returns a timer on the store's clock.
	NewTimer(d time.Duration) clock.Timer
}

// requestState numbers requests and tracks RequestAsync waiters, which
// Close waits for.
type requestState struct {
	once   sync.Once
	client string // REPLY_TO_CLIENT: this producer's id
	seq    atomic.Uint64
	wg     sync.WaitGroup
}

// clientID is the producer's reply-to id, made on first use.
func (r *requestState) clientID() string {
	r.once.Do(func() {
		var b [8]byte
		for i := range b {
			b[i] = byte(rand.Uint32())
		}
		r.client = "producer-" + hex.EncodeToString(b[:])
	})
	return r.client
}

// pending is one request waiting for its reply.
type pending struct {
	id    string
	ch    chan *message.MessageExt
	timer clock.Timer
	rs    Replies
}

// Request sends m as a request and waits for its reply. m is stored as
// SendOneway stores it, with three properties added: a new correlation ID
// (CORRELATION_ID), this producer's id (REPLY_TO_CLIENT) and
// Options.RequestTimeout in milliseconds (TTL); a consumer that receives
// it answers with Store.Reply. Request returns the reply as stored in the
// store's reply topic, or an error: ctx's error if ctx ends first,
// ErrRequestTimeout after Options.RequestTimeout on the store's clock
// (both match context.DeadlineExceeded for a deadline), ErrClosed if the
// producer closes. A reply arriving after Request gave up is dropped and
// counted (Stats.Requests.LateReplies). m is not modified; bad input (nil
// m, m carrying the request properties, any send error) stores nothing.
func (p *Producer) Request(ctx context.Context, m *message.Message) (*message.MessageExt, error) {
	if p == nil {
		return nil, errs.NilReceiver("producer.Producer")
	}
	if err := errs.CheckContext(ctx, "mqlite/producer: request"); err != nil {
		return nil, err
	}
	r, err := p.sendRequest(ctx, m)
	if err != nil {
		return nil, err
	}
	return p.awaitReply(ctx, r)
}

// RequestAsync sends m as Request does and returns at once; cb gets the
// reply or the error Request would return, exactly once, on a goroutine
// of the producer (one per pending request: callbacks of different
// requests may run concurrently). If RequestAsync returns an error (bad
// input, a send error, nil cb) nothing is stored and cb is never called.
// ctx bounds the wait for the reply too. A pending request counts
// against Options.MaxInFlight with the async sends: at the bound
// RequestAsync blocks until a request or send completes, ctx ends (its
// error; nothing stored) or the producer closes (ErrClosed). Close waits
// for pending callbacks (they get ErrClosed), so cb must not call Close.
func (p *Producer) RequestAsync(ctx context.Context, m *message.Message, cb func(*message.MessageExt, error)) error {
	if p == nil {
		return errs.NilReceiver("producer.Producer")
	}
	if err := errs.CheckContext(ctx, "mqlite/producer: request async"); err != nil {
		return err
	}
	if cb == nil {
		return fmt.Errorf("mqlite/producer: nil callback: %w", errs.ErrInvalidArgument)
	}
	a := &p.async
	a.mu.RLock() // Close takes it exclusively: no wg.Add after Close waits
	defer a.mu.RUnlock()
	if err := a.acquire(ctx, "request async"); err != nil {
		return err
	}
	r, err := p.sendRequest(ctx, m)
	if err != nil {
		<-a.slots
		return err
	}
	p.req.wg.Add(1)
	go func() {
		defer p.req.wg.Done()
		rep, err := p.awaitReply(ctx, r)
		<-a.slots // before cb: a callback may make the next request
		cb(rep, err)
	}()
	return nil
}

// sendRequest registers a pending request and stores its message.
func (p *Producer) sendRequest(ctx context.Context, m *message.Message) (*pending, error) {
	rs, ok := p.st.(Replies)
	if !ok {
		return nil, fmt.Errorf("mqlite/producer: request: the store routes no replies: %w", errs.ErrInvalidArgument)
	}
	if m == nil {
		return nil, message.ErrNilMessage
	}
	for _, k := range []string{message.PropCorrelationID, message.PropReplyToClient, message.PropTTL, message.PropMessageType} {
		if _, set := m.Properties[k]; set {
			return nil, fmt.Errorf("%w: %q is set by Request", message.ErrInvalidProperty, k)
		}
	}
	timeout := p.opts.RequestTimeout
	if timeout == 0 {
		timeout = DefaultRequestTimeout
	}
	client := p.req.clientID()
	id := client + "-" + strconv.FormatUint(p.req.seq.Add(1), 10)
	c := *m
	c.Properties = maps.Clone(m.Properties)
	if c.Properties == nil {
		c.Properties = make(map[string]string, 3)
	}
	c.Properties[message.PropCorrelationID] = id
	c.Properties[message.PropReplyToClient] = client
	c.Properties[message.PropTTL] = strconv.FormatInt(timeout.Milliseconds(), 10)

	r := &pending{id: id, ch: make(chan *message.MessageExt, 1), rs: rs}
	if err := rs.Expect(id, r.ch); err != nil { // before the send: a fast reply finds it
		return nil, err
	}
	r.timer = rs.NewTimer(timeout)
	if _, err := p.store(ctx, &c, WaitKick); err != nil {
		r.timer.Stop()
		rs.Forget(id)
		return nil, err
	}
	return r, nil
}

// awaitReply waits for r's reply, ctx, the timeout or Close.
func (p *Producer) awaitReply(ctx context.Context, r *pending) (*message.MessageExt, error) {
	defer r.timer.Stop()
	var err error
	select {
	case rep := <-r.ch:
		return rep, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-r.timer.C():
		err = ErrRequestTimeout
	case <-p.async.quit:
		err = errs.ErrClosed
	}
	if !r.rs.Forget(r.id) { // the reply won the race: it is in r.ch
		return <-r.ch, nil
	}
	if err == ErrRequestTimeout {
		return nil, fmt.Errorf("%w: correlation ID %s", err, r.id)
	}
	return nil, fmt.Errorf("mqlite/producer: request %s: %w", r.id, err)
}

// closeRequests waits for RequestAsync callbacks; Close calls it after
// quit is closed, which ends their waits.
func (p *Producer) closeRequests() { p.req.wg.Wait() }
