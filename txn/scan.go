package txn

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// readBatch is the number of messages read from the half or op queue at a
// time.
const readBatch = 256

// catchUp reads the half and op queues from the cursors to the ends they
// had when it started, merging the two in CommitLog order: a half message
// is added to the pending set before any op record stored after it is
// applied, so the set only ever holds messages unresolved at that point of
// the log. The op queue's end is taken first: every half message an op
// record below it names was readable before, hence lies below the half
// queue's end taken next. The caller holds s.round.
func (s *Service) catchUp() error {
	oLimit, err := s.maxOffset(topic.OpHalf)
	if err != nil {
		return err
	}
	hLimit, err := s.maxOffset(topic.Half)
	if err != nil {
		return err
	}
	s.mu.Lock()
	h, o := s.mu.halfNext, s.mu.opNext
	s.mu.Unlock()
	var hb, ob []*message.MessageExt
	for {
		if len(hb) == 0 && h < hLimit {
			if hb, h, err = s.readQueue(topic.Half, h, hLimit); err != nil {
				return err
			}
			if len(hb) == 0 {
				hLimit = h // trimmed away, or shorter than it said
			}
		}
		if len(ob) == 0 && o < oLimit {
			if ob, o, err = s.readQueue(topic.OpHalf, o, oLimit); err != nil {
				return err
			}
			if len(ob) == 0 {
				oLimit = o
			}
		}
		switch {
		case len(hb) > 0 && (len(ob) == 0 || hb[0].CommitLogOffset < ob[0].CommitLogOffset):
			s.addHalf(hb[0])
			h = hb[0].QueueOffset + 1
			hb = hb[1:]
		case len(ob) > 0:
			s.applyOp(ob[0])
			o = ob[0].QueueOffset + 1
			ob = ob[1:]
		default:
			return nil
		}
	}
}

// maxOffset is the end of topic's queue 0; a topic never created is empty.
func (s *Service) maxOffset(t string) (int64, error) {
	n, err := s.st.MaxOffset(t, 0)
	if errors.Is(err, errs.ErrTopicNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("max offset of %s: %w", t, err)
	}
	return n, nil
}

// readQueue reads a batch of topic's queue 0 from from, below limit.
// Below the queue's minimum (retention deleted the messages) it moves to
// the minimum and logs what was skipped.
func (s *Service) readQueue(t string, from, limit int64) ([]*message.MessageExt, int64, error) {
	n := int(min(readBatch, limit-from))
	ms, err := s.st.Read(t, 0, from, n)
	if errors.Is(err, errs.ErrNotFound) {
		first, serr := s.seekMin(t, from, limit)
		if serr != nil {
			return nil, from, serr
		}
		s.log.Warn("mqlite/txn: messages deleted before they were read", "topic", t, "from", from, "to", first)
		from = first
		if from >= limit {
			return nil, from, nil
		}
		ms, err = s.st.Read(t, 0, from, int(min(readBatch, limit-from)))
	}
	if errors.Is(err, errs.ErrTopicNotFound) {
		return nil, from, nil
	}
	if err != nil {
		return nil, from, fmt.Errorf("read %s from %d: %w", t, from, err)
	}
	for len(ms) > 0 && ms[len(ms)-1].QueueOffset >= limit {
		ms = ms[:len(ms)-1]
	}
	return ms, from, nil
}

// seekMin finds the queue's minimum offset above from by bisection: reads
// below it fail with ErrNotFound.
func (s *Service) seekMin(t string, from, hi int64) (int64, error) {
	lo := from // known to be below the minimum
	for lo+1 < hi {
		mid := lo + (hi-lo)/2
		_, err := s.st.Read(t, 0, mid, 1)
		switch {
		case errors.Is(err, errs.ErrNotFound):
			lo = mid
		case err != nil:
			return from, fmt.Errorf("read %s at %d: %w", t, mid, err)
		default:
			hi = mid
		}
	}
	return max(hi, from), nil
}

// addHalf adds a half message just read to the pending set, unless a
// Producer resolved it in the meantime.
func (s *Service) addHalf(m *message.MessageExt) {
	off := m.QueueOffset
	s.mu.Lock()
	defer s.mu.Unlock()
	if off < s.mu.halfNext {
		return // read twice
	}
	s.mu.halfNext = off + 1
	done := s.mu.resolved.has(off)
	s.mu.resolved.advance(off + 1)
	orphan := s.mu.orphans[off]
	delete(s.mu.orphans, off)
	if done {
		return
	}
	wait := s.opts.Timeout
	if imm, ok := immunity(m.Properties); ok && imm > wait {
		wait = imm
	}
	group := m.Properties[PropProducerGroup]
	if g, ok := s.mu.groups[group]; ok {
		group = g
	} else {
		s.mu.groups[group] = group
	}
	s.mu.pending[off] = &entry{
		off: off, clOff: m.CommitLogOffset, opAt: s.mu.opNext,
		stored: m.StoreTimestamp, due: m.StoreTimestamp.Add(wait),
		group: group, uniq: m.UniqKey, orphan: orphan,
	}
}

// applyOp applies an op record: a done record resolves the half messages
// it names, a check record counts a check-back of each.
func (s *Service) applyOp(m *message.MessageExt) {
	tag, offs := parseOp(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.opNext = m.QueueOffset + 1
	for _, off := range offs {
		e := s.mu.pending[off]
		switch tag {
		case OpTagDone:
			if e != nil {
				delete(s.mu.pending, off)
			} else if off >= s.mu.halfNext {
				// Named before it could be read: only a store that
				// does not make records readable in log order.
				s.mu.resolved.add(off)
			}
		case OpTagCheck:
			if e != nil && m.QueueOffset >= e.counted {
				e.checks++
				e.counted = m.QueueOffset + 1
			}
		}
	}
}

// parseOp returns an op record's tag and the half queue offsets its body
// lists: decimal numbers separated (or ended) by commas, which covers
// RocketMQ 4's single offset and RocketMQ 5's batched list. Malformed
// numbers are skipped.
func parseOp(m *message.MessageExt) (string, []int64) {
	var offs []int64
	for f := range strings.SplitSeq(string(m.Body), ",") {
		if f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 {
			continue
		}
		offs = append(offs, n)
	}
	return m.Tags, offs
}

// opBody is the body of an op record naming one half message.
func opBody(off int64) []byte { return strconv.AppendInt(nil, off, 10) }

// immunity parses PropCheckImmunity: ok is false when it is absent.
func immunity(props map[string]string) (time.Duration, bool) {
	v, ok := props[PropCheckImmunity]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > int64(maxImmunity/time.Second) {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// maxImmunity bounds PropCheckImmunity (RocketMQ keeps half messages for
// the CommitLog's 72 h retention; a longer wait could never be checked).
const maxImmunity = 72 * time.Hour

// offsetSet is a set of queue offsets at or above base, one bit each: the
// half messages a Producer resolved before the service read them. Its
// size is bounded by the half messages stored since the last read.
type offsetSet struct {
	base  int64 // offset of bit 0 of words[0]
	words []uint64
}

func (s *offsetSet) add(off int64) {
	if off < s.base {
		return
	}
	i := off - s.base
	w := int(i / 64)
	for len(s.words) <= w {
		s.words = append(s.words, 0)
	}
	s.words[w] |= 1 << (i % 64)
}

func (s *offsetSet) has(off int64) bool {
	if off < s.base {
		return false
	}
	i := off - s.base
	w := int(i / 64)
	return w < len(s.words) && s.words[w]&(1<<(i%64)) != 0
}

// advance forgets whole words below off.
func (s *offsetSet) advance(off int64) {
	if off <= s.base {
		return
	}
	k := (off - s.base) / 64
	if k == 0 {
		return
	}
	if k >= int64(len(s.words)) {
		s.words = s.words[:0]
		s.base = off
		return
	}
	n := copy(s.words, s.words[k:])
	s.words = s.words[:n]
	s.base += k * 64
}
