package mqlite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/producer"
)

// Request-reply (Producer.Request, RequestAsync, Store.Reply), as
// RocketMQ's: a request is an ordinary message with a correlation ID and
// a reply-to added; the replier's Reply stores the answer in ReplyTopic
// (durable and readable like any message) and hands it to the requester
// waiting in this process for that correlation ID. A reply nobody waits
// for any more (the requester timed out, gave up, closed, or the store
// was reopened since) is dropped and counted in Stats.Requests.

// ReplyTopic holds every reply, one queue. RocketMQ names it
// "{cluster}_REPLY_TOPIC"; an embedded store has no cluster, and the
// "rmq_sys_" prefix makes it a system topic users cannot send to.
const ReplyTopic = "rmq_sys_REPLY_TOPIC"

// Request-reply properties, with RocketMQ's names; see package message.
const (
	PropCorrelationID = message.PropCorrelationID
	PropReplyToClient = message.PropReplyToClient
	PropTTL           = message.PropTTL
	PropMessageType   = message.PropMessageType
	ReplyMessageFlag  = message.ReplyMessageFlag
)

var (
	// ErrNotRequest: Reply to a message that is not a request (no
	// correlation ID or reply-to, or a reply itself). It matches
	// ErrInvalidArgument.
	ErrNotRequest = fmt.Errorf("%w: not a request", errs.ErrInvalidArgument)
	// ErrRequestTimeout: no reply within ProducerOptions.RequestTimeout on
	// the store's clock. It matches context.DeadlineExceeded.
	ErrRequestTimeout = producer.ErrRequestTimeout
)

// RequestStats counts request-reply traffic since Open.
type RequestStats struct {
	// Pending is the number of requests waiting for their reply.
	Pending int
	// Replies counts replies handed to a waiting requester.
	Replies int64
	// LateReplies counts replies stored but dropped because no requester
	// waited for them any more (timed out, ctx ended, producer closed, a
	// second reply to one request, or a request from before a reopen).
	LateReplies int64
}

// replyRouter pairs replies with waiting requests by correlation ID.
type replyRouter struct {
	mu struct {
		sync.Mutex
		waiting map[string]chan<- *MessageExt
	}
	routed atomic.Int64
	late   atomic.Int64
}

func (r *replyRouter) expect(id string, ch chan<- *MessageExt) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.waiting == nil {
		r.mu.waiting = map[string]chan<- *MessageExt{}
	}
	if _, dup := r.mu.waiting[id]; dup {
		return fmt.Errorf("mqlite: request %s is pending already: %w", id, errs.ErrInvalidArgument)
	}
	r.mu.waiting[id] = ch
	return nil
}

// forget removes id; false if it was not pending (its reply was routed).
func (r *replyRouter) forget(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.mu.waiting[id]
	delete(r.mu.waiting, id)
	return ok
}

// route hands m to the request waiting for id, or counts it late.
func (r *replyRouter) route(id string, m *MessageExt) bool {
	r.mu.Lock()
	ch, ok := r.mu.waiting[id]
	delete(r.mu.waiting, id)
	r.mu.Unlock()
	if !ok {
		r.late.Add(1)
		return false
	}
	r.routed.Add(1) // before the send: a requester that has its reply sees it counted
	ch <- m         // capacity 1, one send per registration: never blocks
	return true
}

func (r *replyRouter) stats() RequestStats {
	r.mu.Lock()
	n := len(r.mu.waiting)
	r.mu.Unlock()
	return RequestStats{Pending: n, Replies: r.routed.Load(), LateReplies: r.late.Load()}
}

// Reply answers request, a message a consumer received from
// Producer.Request, with body: the reply is stored in ReplyTopic with the
// request's correlation ID, reply-to and TTL and MSG_TYPE "reply", made
// durable as the flush mode promises, and handed to the waiting
// requester. If the requester no longer waits the reply stays stored and
// counts in Stats.Requests.LateReplies (Reply still succeeds: the replier
// cannot know; a second reply to one request, e.g. from a broadcasting
// group's other members, is late too). Errors: a nil or done ctx,
// ErrNotRequest (not a request, or a reply), ErrNilMessage, ErrEmptyBody,
// ErrMessageTooLarge, ErrClosed, ErrReadOnly; all store nothing. Once the
// reply is stored it is handed over even if Reply then returns
// ErrFlushTimeout or ctx's error (the reply is stored, as a send that
// returns those has stored its message), but not after a failed sync
// (ErrFenced, ErrIO).
func (s *Store) Reply(ctx context.Context, request *MessageExt, body []byte) (PutResult, error) {
	if err := s.enter(ctx, "reply"); err != nil {
		return PutResult{}, err
	}
	if err := s.writable("reply"); err != nil {
		return PutResult{}, err
	}
	if request == nil {
		return PutResult{}, fmt.Errorf("mqlite: reply: %w", message.ErrNilMessage)
	}
	if !message.IsRequest(&request.Message) {
		return PutResult{}, fmt.Errorf("mqlite: reply: message %q of topic %q: %w (it needs %s and %s, and must not be a reply)",
			request.MsgID, request.Topic, ErrNotRequest, PropCorrelationID, PropReplyToClient)
	}
	rep := s.replyMessage(request, body)
	if err := message.Validate(rep, s.opts.MaxMessageSize, message.MaxSysTopicLen, uniqLen, s.opts.Clock.Now()); err != nil {
		return PutResult{}, fmt.Errorf("mqlite: reply: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return PutResult{}, err
	}
	if _, err := s.sysQueueCount(ReplyTopic, 1); err != nil {
		return PutResult{}, err
	}
	res, err := s.append(ctx, rep, 0, true, true)
	if err != nil {
		return PutResult{}, err
	}
	err = s.awaitDurable(ctx, res.End())
	if err != nil && (errors.Is(err, errs.ErrFenced) || errors.Is(err, errs.ErrIO)) {
		return res, err // a failed sync: the reply may not survive; the requester times out
	}
	s.replies.route(rep.Properties[PropCorrelationID], replyExt(rep, res))
	return res, err
}

// replyMessage builds the reply to req.
func (s *Store) replyMessage(req *MessageExt, body []byte) *Message {
	props := map[string]string{
		PropCorrelationID: req.Properties[PropCorrelationID],
		PropReplyToClient: req.Properties[PropReplyToClient],
		PropMessageType:   ReplyMessageFlag,
	}
	if ttl := req.Properties[PropTTL]; ttl != "" {
		props[PropTTL] = ttl
	}
	return &Message{Topic: ReplyTopic, Body: body, Properties: props,
		Keys: []string{req.Properties[PropCorrelationID]}}
}

// replyExt is the reply as the requester gets it: what was stored, where.
func replyExt(m *Message, res PutResult) *MessageExt {
	c := *m
	c.Body = append([]byte(nil), m.Body...)
	c.Properties = maps.Clone(m.Properties)
	c.UniqKey = res.UniqKey()
	return &MessageExt{Message: c, QueueID: res.QueueID, QueueOffset: res.QueueOffset,
		CommitLogOffset: res.Offset, StoreSize: int32(res.Size), StoreTimestamp: res.StoreTime, MsgID: res.MsgID()}
}

// producerStore routes replies for Producer.Request.
var _ producer.Replies = producerStore{}

func (p producerStore) Expect(id string, ch chan<- *MessageExt) error {
	return p.s.replies.expect(id, ch)
}
func (p producerStore) Forget(id string) bool                { return p.s.replies.forget(id) }
func (p producerStore) NewTimer(d time.Duration) clock.Timer { return p.s.opts.Clock.NewTimer(d) }
