package txn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// runRound is one check round: catch up, check what is due, save.
func (s *Service) runRound(ctx context.Context) error {
	s.round.Lock()
	defer s.round.Unlock()
	if err := s.catchUp(); err != nil {
		return err
	}
	var first error
	for _, e := range s.claimDue() {
		if ctx.Err() != nil {
			s.release(e)
			continue
		}
		if err := s.check(ctx, e); err != nil && ctx.Err() == nil {
			s.log.Warn("mqlite/txn: check-back failed; retried next round", "half_offset", e.off, "transaction", e.uniq, "err", err)
			if first == nil {
				first = err
			}
		}
	}
	if err := s.saveProgress(); err != nil {
		return err
	}
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// claimDue marks busy and returns, in queue order, the pending messages
// old enough to check whose local transaction is not running here.
func (s *Service) claimDue() []*entry {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []*entry
	for _, e := range s.mu.pending {
		if e.busy || s.mu.local[e.uniq] > 0 || now.Before(e.due) {
			continue
		}
		e.busy = true
		due = append(due, e)
	}
	slices.SortFunc(due, func(a, b *entry) int { return cmp.Compare(a.off, b.off) })
	return due
}

func (s *Service) release(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.busy = false
}

// resolve removes e from the pending set: its op record is written.
func (s *Service) resolve(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.pending, e.off)
}

// check handles one due message: record an outcome already known (real
// message stored), discard it past MaxChecks, or ask its group's checker
// and apply the answer. It releases or resolves e.
func (s *Service) check(ctx context.Context, e *entry) (err error) {
	resolved := false
	defer func() {
		if resolved {
			s.resolve(e)
		} else {
			s.release(e)
		}
	}()
	s.mu.Lock()
	orphan, checks, probe := e.orphan, e.checks, !e.probed
	checker := s.checkerLocked(e.group)
	s.mu.Unlock()
	if orphan {
		if err := s.writeOp(ctx, e.off, "COMMIT_MESSAGE"); err != nil {
			return err
		}
		resolved = true
		return nil
	}
	if checker == nil && !probe && checks < s.opts.MaxChecks {
		return nil // left pending, not counted, until the group registers
	}
	half, err := s.st.ReadAt(e.clOff)
	if errors.Is(err, errs.ErrNotFound) {
		s.log.Error("mqlite/txn: half message deleted before it was resolved; discarded", "half_offset", e.off, "transaction", e.uniq)
		resolved, err = s.discard(ctx, e, nil)
		return err
	}
	if err != nil {
		return fmt.Errorf("read half message at %d: %w", e.clOff, err)
	}
	rm, queue, err := realOf(half)
	if err != nil {
		s.log.Error("mqlite/txn: malformed half message; discarded", "half_offset", e.off, "err", err)
		resolved, err = s.discard(ctx, e, nil)
		return err
	}
	// A crash between the real message and the op record leaves the
	// message committed but unresolved: record it, do not ask.
	found, err := s.st.HasUniqKey(rm.Topic, e.uniq, e.stored)
	if err != nil {
		return fmt.Errorf("look up transaction %s in %q: %w", e.uniq, rm.Topic, err)
	}
	s.mu.Lock()
	e.probed = true
	s.mu.Unlock()
	if found {
		if err := s.writeOp(ctx, e.off, "COMMIT_MESSAGE"); err != nil {
			return err
		}
		resolved = true
		return nil
	}
	if checks >= s.opts.MaxChecks {
		resolved, err = s.discard(ctx, e, half)
		return err
	}
	if checker == nil {
		if !e.noChecker {
			e.noChecker = true
			s.log.Info("mqlite/txn: no checker registered for producer group; message left pending", "group", e.group, "transaction", e.uniq)
		}
		return nil
	}
	resolved, err = s.askAndApply(ctx, e, checker, half, rm, queue)
	return err
}

// askAndApply counts one more check of e, asks checker, and applies the
// answer: commit (store rm in queue, then the op record), rollback (the op
// record), or unknown (discarded after the last check). It reports whether
// e is resolved.
func (s *Service) askAndApply(ctx context.Context, e *entry, checker Checker, half *message.MessageExt, rm *message.Message, queue int) (resolved bool, err error) {
	// Count the check before asking, so a crash never loses a count.
	r, err := s.writeOpTag(ctx, OpTagCheck, e.off, "")
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	e.checks++
	e.counted = r.QueueOffset + 1 // do not count this record again when read
	n := e.checks
	s.mu.Unlock()
	state := s.ask(ctx, checker, half, rm, queue, n)
	// The answer is given: record it even if ctx ends now.
	ctx = context.WithoutCancel(ctx)
	switch state {
	case CommitMessage:
		if _, err := s.st.Append(ctx, rm, queue); err != nil && !errors.Is(err, ErrFlushTimeout) {
			return false, fmt.Errorf("commit transaction %s: %w", e.uniq, err)
		}
		if err := s.writeOp(ctx, e.off, state.String()); err != nil {
			s.mu.Lock()
			e.orphan = true
			s.mu.Unlock()
			return false, err
		}
		return true, nil
	case RollbackMessage:
		if err := s.writeOp(ctx, e.off, state.String()); err != nil {
			return false, err
		}
		return true, nil
	default:
		if n >= s.opts.MaxChecks {
			return s.discard(ctx, e, half)
		}
	}
	return false, nil
}

// ask calls checker with the half message as the checker sees it. A panic
// or an undefined state counts as Unknown.
func (s *Service) ask(ctx context.Context, checker Checker, half *message.MessageExt, rm *message.Message, queue, n int) (state TxState) {
	m := *half
	m.Message = *rm
	m.QueueID = queue
	m.SysFlag = rm.SysFlag&^message.SysTxTypeMask | message.SysTxPrepared
	m.PreparedTxOffset = 0
	m.Properties = maps.Clone(rm.Properties)
	if m.Properties == nil {
		m.Properties = map[string]string{}
	}
	m.Properties[PropCheckTimes] = strconv.Itoa(n)
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("mqlite/txn: checker panicked; counted as UNKNOW", "transaction", half.UniqKey, "panic", r, "stack", string(debug.Stack()))
			state = Unknown
		}
	}()
	state = checker(ctx, &m)
	if !state.valid() {
		s.log.Error("mqlite/txn: checker returned an undefined state; counted as UNKNOW", "transaction", half.UniqKey, "state", state)
		state = Unknown
	}
	return state
}

// discard gives up on e: park a copy in topic.CheckMax if asked (half is
// nil when the message cannot be read), then write the op record.
func (s *Service) discard(ctx context.Context, e *entry, half *message.MessageExt) (bool, error) {
	if s.opts.ParkAfterMax && half != nil {
		parked, err := s.st.HasUniqKey(topic.CheckMax, e.uniq, e.stored)
		if err != nil {
			return false, fmt.Errorf("look up transaction %s in %q: %w", e.uniq, topic.CheckMax, err)
		}
		if !parked {
			m := half.Message
			m.Topic = topic.CheckMax
			m.Properties = maps.Clone(half.Properties)
			m.Properties[PropCheckTimes] = strconv.Itoa(e.checks)
			if _, err := s.st.Append(ctx, &m, 0); err != nil && !errors.Is(err, ErrFlushTimeout) {
				return false, fmt.Errorf("park transaction %s: %w", e.uniq, err)
			}
		}
	}
	if err := s.writeOp(ctx, e.off, "DISCARD"); err != nil {
		return false, err
	}
	s.log.Warn("mqlite/txn: transaction unresolved after the last check-back; discarded",
		"transaction", e.uniq, "group", e.group, "checks", e.checks, "parked", s.opts.ParkAfterMax && half != nil)
	return true, nil
}

// writeOp records that the half message at queue offset off is resolved.
func (s *Service) writeOp(ctx context.Context, off int64, state string) error {
	_, err := s.writeOpTag(ctx, OpTagDone, off, state)
	return err
}

func (s *Service) writeOpTag(ctx context.Context, tag string, off int64, state string) (message.PutResult, error) {
	m := &message.Message{Topic: topic.OpHalf, Tags: tag, Body: opBody(off), BornTimestamp: s.opts.Clock.Now()}
	if state != "" {
		m.Properties = map[string]string{PropTxState: state}
	}
	r, err := s.st.Append(ctx, m, 0)
	if err != nil && !errors.Is(err, ErrFlushTimeout) {
		return r, fmt.Errorf("write op record %q for half offset %d: %w", tag, off, err)
	}
	return r, nil
}

// internalProps are the properties a half message carries for this
// package only.
var internalProps = []string{message.PropRealTopic, message.PropRealQueueID, PropTranMsg, PropProducerGroup, PropCheckTimes}

// realOf rebuilds the message a half message stands for, and its queue.
func realOf(half *message.MessageExt) (*message.Message, int, error) {
	t := half.Properties[message.PropRealTopic]
	if t == "" || topic.IsSystem(t) {
		return nil, 0, fmt.Errorf("%w: half message at %d has real topic %q", ErrCorrupt, half.CommitLogOffset, t)
	}
	q, err := strconv.Atoi(half.Properties[message.PropRealQueueID])
	if err != nil || q < 0 || q >= topic.MaxQueues {
		return nil, 0, fmt.Errorf("%w: half message at %d has real queue %q", ErrCorrupt, half.CommitLogOffset, half.Properties[message.PropRealQueueID])
	}
	m := half.Message
	m.Topic = t
	m.Properties = maps.Clone(half.Properties)
	for _, p := range internalProps {
		delete(m.Properties, p)
	}
	if len(m.Properties) == 0 {
		m.Properties = nil
	}
	m.SysFlag = m.SysFlag&^message.SysTxTypeMask | message.SysTxCommit
	m.PreparedTxOffset = half.CommitLogOffset
	return &m, q, nil
}
