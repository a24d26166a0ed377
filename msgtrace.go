package mqlite

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mqlite/mqlite/hook"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// TraceTopic is the system topic of the message trace (Options.MessageTrace),
// RocketMQ's default trace topic. Its records age out with the CommitLog
// like any other topic's.
const TraceTopic = "RMQ_SYS_TRACE_TOPIC"

// TraceType names a step of a message's life.
type TraceType string

// Trace steps, in the order a message meets them.
const (
	TraceStored    TraceType = "stored"        // a record of the message in a topic (first send, retry copy, dead letter, re-drive)
	TraceScheduled TraceType = "scheduled"     // stored in the schedule or timer topic until due (delay, retry)
	TraceSent      TraceType = "sent"          // a send returned (Duration: its time)
	TraceDelivered TraceType = "delivered"     // handed to a consumer group's member
	TraceConsumed  TraceType = "consumed"      // the handler succeeded
	TraceFailed    TraceType = "failed"        // the handler failed (ReconsumeLater, panic, timeout)
	TraceRetried   TraceType = "retried"       // the failed copy (Topic, Queue, Offset) went to the retry path (Attempt, Level, Delay)
	TraceDead      TraceType = "dead-lettered" // the failed copy went to the group's dead-letter topic
	TraceRedriven  TraceType = "redriven"      // sent back from the DLQ as a new message (NewUniqKey, NewID)
	TraceTxDecided TraceType = "tx-decided"    // a transaction's outcome (State)
)

// TraceEvent is one step of a message's life (Store.Trace).
type TraceEvent struct {
	Type TraceType `json:"type"`
	// Time is the store clock when the step was recorded.
	Time time.Time `json:"time"`
	// UniqKey is the message's unique key, which its retry copies and
	// dead letter keep.
	UniqKey string `json:"uniq"`
	// MsgID, Topic, Queue and Offset say which stored copy the step is
	// about (Offset -1: not assigned yet, as for a delayed send).
	MsgID  string `json:"id,omitempty"`
	Topic  string `json:"topic,omitempty"`
	Queue  int    `json:"queue"`
	Offset int64  `json:"offset"`
	// Group and Member are the consumer (delivered, consumed, failed,
	// retried, dead-lettered, redriven); for "sent", Group is the
	// producer's ProducerOptions.Group, if it has one.
	Group  string `json:"group,omitempty"`
	Member string `json:"member,omitempty"`
	// Attempt is the reconsume count: of the delivery, or the retry's new one.
	Attempt int32 `json:"attempt,omitempty"`
	// Level is a retry's delay level (0: a DeliverAt time), Delay its wait.
	Level int           `json:"level,omitempty"`
	Delay time.Duration `json:"delay,omitempty"`
	// Duration is a send's or a handler call's wall time.
	Duration time.Duration `json:"duration,omitempty"`
	// NewUniqKey and NewID name a re-driven message.
	NewUniqKey string `json:"newUniq,omitempty"`
	NewID      string `json:"newId,omitempty"`
	// State is a transaction's outcome.
	State string `json:"state,omitempty"`
	// Pull is true for a delivery by a pull consumer's Poll.
	Pull bool `json:"pull,omitempty"`
}

// String prints the event on one line.
func (e TraceEvent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-13s %s:%d@%d", e.Time.UTC().Format("2006-01-02T15:04:05.000"), e.Type, e.Topic, e.Queue, e.Offset)
	if e.Group != "" {
		fmt.Fprintf(&b, " group=%s", e.Group)
	}
	if e.Member != "" {
		fmt.Fprintf(&b, " member=%s", e.Member)
	}
	if e.Attempt != 0 {
		fmt.Fprintf(&b, " attempt=%d", e.Attempt)
	}
	if e.Level != 0 || e.Delay != 0 {
		fmt.Fprintf(&b, " level=%d delay=%s", e.Level, e.Delay)
	}
	if e.Duration != 0 {
		fmt.Fprintf(&b, " took=%s", e.Duration)
	}
	if e.NewID != "" {
		fmt.Fprintf(&b, " new=%s", e.NewID)
	}
	if e.State != "" {
		fmt.Fprintf(&b, " state=%s", e.State)
	}
	fmt.Fprintf(&b, " id=%s uniq=%s", e.MsgID, e.UniqKey)
	return b.String()
}

// tracer records trace events in TraceTopic.
type tracer struct{ s *Store }

// hooks are the tracer's hooks, chained after the user's.
func (t tracer) hooks() hook.Hooks {
	return hook.Hooks{
		AfterSend:     t.sent,
		Stored:        t.stored,
		BeforeConsume: t.delivered,
		AfterConsume:  t.consumed,
		Retry:         func(e hook.RetryEvent) { t.retried(TraceRetried, e) },
		DeadLetter:    func(e hook.RetryEvent) { t.retried(TraceDead, e) },
		Redrive:       t.redriven,
		TxDecision:    t.txDecided,
	}
}

// record appends e to the trace topic under keys (its unique key and the
// IDs it concerns). A failure is logged: tracing never fails the step.
func (t tracer) record(e *TraceEvent, keys ...string) {
	s := t.s
	e.Time = time.UnixMilli(s.nowMs())
	body, err := json.Marshal(e)
	if err == nil {
		if _, err = s.sysQueueCount(TraceTopic, 1); err == nil {
			m := Message{Topic: TraceTopic, Keys: slices.DeleteFunc(keys, func(k string) bool { return k == "" }), Body: body}
			if _, err = s.append(context.Background(), &m, 0, true, true); err == nil {
				// Nobody waits for a trace record: start its sync (a FlushSync
				// reader sees synced records only) instead of leaving it to
				// the next send's.
				s.kick()
			}
		}
	}
	if err != nil {
		s.hooks.log.Warn("mqlite: message trace: record not stored", "type", e.Type, "err", err)
	}
}

func (t tracer) sent(_ context.Context, e hook.SendEvent) {
	if e.Err != nil && e.Result.Size == 0 {
		return // nothing stored: nothing to trace
	}
	r := e.Result
	t.record(&TraceEvent{Type: TraceSent, UniqKey: r.UniqKey(), MsgID: r.MsgID(), Topic: e.Message.Topic, Queue: r.QueueID,
		Offset: r.QueueOffset, Group: e.Producer, Duration: e.Duration}, r.UniqKey(), r.MsgID())
}

// stored traces records of user topics, of retry and dead-letter topics,
// and delayed copies; the store's other own topics are not traced.
func (t tracer) stored(e hook.StoreEvent) {
	typ := TraceStored
	switch {
	case e.Result.Delayed:
		typ = TraceScheduled
	case e.Topic == TraceTopic:
		return
	case topic.IsSystem(e.Topic) && !strings.HasPrefix(e.Topic, topic.RetryPrefix) && !strings.HasPrefix(e.Topic, topic.DLQPrefix):
		if e.Topic != topic.Schedule && e.Topic != topic.Timer {
			return
		}
		typ = TraceScheduled
	}
	r := e.Result
	t.record(&TraceEvent{Type: typ, UniqKey: r.UniqKey(), MsgID: r.MsgID(), Topic: e.Topic, Queue: r.QueueID, Offset: r.QueueOffset,
		Attempt: e.Message.ReconsumeTimes}, r.UniqKey(), r.MsgID())
}

func (t tracer) delivered(ctx context.Context, e hook.ConsumeEvent) context.Context {
	for _, m := range e.Messages {
		t.record(&TraceEvent{Type: TraceDelivered, UniqKey: m.UniqKey, MsgID: m.MsgID, Topic: storedIn(m, e.Group), Queue: m.QueueID,
			Offset: m.QueueOffset, Group: e.Group, Member: e.Member, Attempt: m.ReconsumeTimes, Pull: e.Pull}, m.UniqKey, m.MsgID)
	}
	return ctx
}

// storedIn is the topic a delivered copy is stored in: consumers hand
// out a retry copy under its original topic, with its queue and offset in
// the group's retry topic.
func storedIn(m *MessageExt, group string) string {
	if m.Properties[PropRetryTopic] != "" && !topic.IsSystem(m.Topic) {
		return topic.RetryTopic(group)
	}
	return m.Topic
}

func (t tracer) consumed(_ context.Context, e hook.ConsumeEvent) {
	typ := TraceConsumed
	if !e.Success {
		typ = TraceFailed
	}
	for _, m := range e.Messages {
		t.record(&TraceEvent{Type: typ, UniqKey: m.UniqKey, MsgID: m.MsgID, Topic: storedIn(m, e.Group), Queue: m.QueueID,
			Offset: m.QueueOffset, Group: e.Group, Member: e.Member, Attempt: m.ReconsumeTimes, Duration: e.Duration}, m.UniqKey, m.MsgID)
	}
}

func (t tracer) retried(typ TraceType, e hook.RetryEvent) {
	m := e.Message
	ev := TraceEvent{Type: typ, UniqKey: m.UniqKey, MsgID: m.MsgID, Topic: storedIn(m, e.Group), Queue: m.QueueID, Offset: m.QueueOffset,
		Group: e.Group, Attempt: e.Attempt}
	if typ == TraceRetried {
		ev.Delay, ev.Level = e.Delay, t.s.levelOf(e.Delay)
	}
	t.record(&ev, m.UniqKey, m.MsgID)
}

func (t tracer) redriven(e hook.RedriveEvent) {
	d := e.Dead
	t.record(&TraceEvent{Type: TraceRedriven, UniqKey: d.UniqKey, MsgID: d.MsgID, Topic: e.Message.Topic, Queue: e.Result.QueueID,
		Offset: e.Result.QueueOffset, Group: e.Group, NewUniqKey: e.Result.UniqKey(), NewID: e.Result.MsgID()},
		d.UniqKey, d.MsgID, e.Result.UniqKey())
}

func (t tracer) txDecided(e hook.TxEvent) {
	t.record(&TraceEvent{Type: TraceTxDecided, UniqKey: e.TransactionID, Topic: e.Topic, Offset: e.HalfOffset, State: e.State}, e.TransactionID)
}

// maxTraceRecords bounds the records one key may have in the trace.
const maxTraceRecords = 4096

// Trace returns the steps of the life of the message with ID msgID, in
// the order they happened (see orderKey), from the trace topic (Options.MessageTrace): its
// sends, stored copies, deliveries, results, retries, death and re-drives,
// and the life of a re-driven message after it. The ID may be that of any
// copy (a retry, a dead letter). ErrNotFound when nothing was traced (the
// trace is off, or retention removed the records). Works on a read-only
// store too.
func (s *Store) Trace(msgID string) ([]TraceEvent, error) {
	if s.closed.Load() {
		return nil, errs.ErrClosed
	}
	if _, err := message.ParseID(msgID); err != nil {
		return nil, err
	}
	if s.topics.Queues(TraceTopic) == 0 {
		return nil, fmt.Errorf("mqlite: trace of %s: no trace records (Options.MessageTrace): %w", msgID, errs.ErrNotFound)
	}
	type rec struct {
		key int64
		sub int
		off int64
		ev  TraceEvent
	}
	var out []rec
	seen := map[int64]bool{}
	queue, asked := []string{msgID}, map[string]bool{msgID: true}
	if m, err := s.MessageByID(msgID); err == nil && m.UniqKey != "" {
		queue, asked[m.UniqKey] = append(queue, m.UniqKey), true
	}
	for len(queue) > 0 {
		key := queue[0]
		queue = queue[1:]
		recs, err := s.traceRecords(key)
		if err != nil {
			return nil, err
		}
		for _, m := range recs {
			if seen[m.CommitLogOffset] {
				continue
			}
			seen[m.CommitLogOffset] = true
			var ev TraceEvent
			if err := json.Unmarshal(m.Body, &ev); err != nil {
				continue // not one of ours
			}
			key, sub := orderKey(&ev, m.CommitLogOffset)
			out = append(out, rec{key, sub, m.CommitLogOffset, ev})
			for _, k := range []string{ev.UniqKey, ev.NewUniqKey} {
				if k != "" && !asked[k] {
					asked[k] = true
					queue = append(queue, k)
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("mqlite: trace of %s: %w", msgID, errs.ErrNotFound)
	}
	slices.SortFunc(out, func(a, b rec) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.sub, b.sub), cmp.Compare(a.off, b.off))
	})
	evs := make([]TraceEvent, len(out))
	for i, r := range out {
		evs[i] = r.ev
	}
	return evs, nil
}

// orderKey places a trace record: a stored copy (and the re-drive that
// stored it, just after) at the copy's own CommitLog offset, anything
// else at its record's. Everything a copy causes (its delivery, a
// consumer's result) is recorded after the copy is appended, so this
// order holds even when a fast consumer records a delivery before the
// sender records the store.
func orderKey(ev *TraceEvent, recOff int64) (int64, int) {
	id, sub := "", 0
	switch ev.Type {
	case TraceStored, TraceScheduled:
		id = ev.MsgID
	case TraceRedriven:
		id, sub = ev.NewID, 1
	}
	if id != "" {
		if off, err := message.ParseID(id); err == nil {
			return off, sub
		}
	}
	return recOff, 0
}

// traceRecords returns the visible trace records with key.
func (s *Store) traceRecords(key string) ([]*MessageExt, error) {
	offs, err := s.disp.idx.Query(TraceTopic+"#"+key, 0, 1<<62, maxTraceRecords)
	if err != nil {
		return nil, err
	}
	var out []*MessageExt
	for _, off := range offs {
		if off >= s.disp.dispatched() {
			continue
		}
		m, err := s.ReadAt(off)
		if s.removedByRetention(off, err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m.Topic == TraceTopic && slices.Contains(m.Keys, key) {
			out = append(out, m)
		}
	}
	return out, nil
}
