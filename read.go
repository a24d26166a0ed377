package mqlite

import (
	"fmt"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// Message is what producers send; see package message for the fields.
type Message = message.Message

// MessageExt is a stored message as read back. Messages read together
// (ReadQueue, Messages, consumers) are decoded into shared blocks of 14 KiB
// (message.Batch): each is the caller's to keep or change, and keeping one
// keeps its blocks alive.
type MessageExt = message.MessageExt

// MessageView reads a stored message in place; valid only inside the
// callback that received it.
type MessageView = message.View

func viewOf(r commitlog.Record) message.View { return message.View(r.Payload) }

// checkPayload checks the structure of a record's payload (its frame and
// checksum were verified by the read).
func (s *Store) checkPayload(r commitlog.Record) error {
	if err := message.CheckPayload(r.Payload); err != nil {
		return s.corruptRecord(r.Offset, "%v", err)
	}
	return nil
}

// corruptRecord is an ErrCorrupt for the record at CommitLog offset off,
// naming its segment file and its position there.
func (s *Store) corruptRecord(off int64, format string, args ...any) error {
	path, pos := s.log.Locate(off)
	return errs.Corrupt(path, pos, "record at commitlog offset %d: %s", off, fmt.Sprintf(format, args...))
}

// ReadAt returns a copy of the message stored at CommitLog offset off.
func (s *Store) ReadAt(off int64) (*MessageExt, error) {
	if s.closed.Load() {
		return nil, errs.ErrClosed
	}
	ext := &MessageExt{}
	err := s.log.Read(off, func(r commitlog.Record) error {
		if err := s.checkPayload(r); err != nil {
			return err
		}
		if err := message.DecodeAt(r.Payload, r.Offset, ext); err != nil {
			return s.corruptRecord(r.Offset, "%v", err)
		}
		if err := message.Inflate(&ext.Message, s.opts.MaxMessageSize); err != nil {
			return s.corruptRecord(r.Offset, "%v", err)
		}
		ext.CommitLogOffset = r.Offset
		ext.StoreSize = int32(r.Size)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.metrics.gets.Add(1)
	return ext, nil
}

// MessageByID returns the message with the given ID in O(1): the ID
// encodes its CommitLog offset. The ID of a delayed send
// (PutResult.Delayed) names the copy that waits for the delivery time:
// MessageByID returns the delivered message once it is delivered (found
// through the IndexFile by its unique key; it has its own ID and queue
// offset), and until then the waiting message as it will be delivered:
// its real topic and queue, QueueOffset -1, DelayLevel or DeliverAt set.
// A message that a purge, DeleteTopic or its topic's own retention hid
// from readers is ErrNotFound, as one whose segment was deleted.
func (s *Store) MessageByID(id string) (*MessageExt, error) {
	off, err := message.ParseID(id)
	if err != nil {
		return nil, err
	}
	m, err := s.ReadAt(off)
	if err == nil && (m.Topic == topic.Schedule || m.Topic == topic.Timer) {
		m, err = s.resolveDelayed(m)
	}
	if err != nil || m == nil {
		return m, err
	}
	hidden, err := s.hiddenByRetention(m)
	if err != nil {
		return nil, err
	}
	if hidden {
		return nil, fmt.Errorf("mqlite: message %s: below the retained start of %s/%d (purged, deleted or past the topic's retention): %w",
			id, m.Topic, m.QueueID, errs.ErrNotFound)
	}
	return m, nil
}

// resolveDelayed is the message a waiting delayed or timer copy m becomes:
// its delivery if there is one, else m as it will be delivered. A copy
// without a real topic is returned as it is.
func (s *Store) resolveDelayed(m *MessageExt) (*MessageExt, error) {
	real, queue, err := fromSchedule(&m.Message)
	if err != nil {
		return m, nil
	}
	d, err := s.findUniqKey(real.Topic, real.UniqKey, m.StoreTimestamp, sameAttempt(real))
	if err != nil || d != nil {
		return d, err
	}
	p := *m
	p.Message = *real
	p.DelayLevel, p.DeliverAt = m.DelayLevel, m.DeliverAt
	p.QueueID, p.QueueOffset = queue, -1
	return &p, nil
}

// View calls fn with a zero-copy view of the message at offset off, after
// verifying its checksum. A body a producer stored compressed is seen
// compressed (SysFlag has message.SysCompressed). The view and every slice taken from it are valid
// only until fn returns.
func (s *Store) View(off int64, fn func(MessageView) error) error {
	if s.closed.Load() {
		return errs.ErrClosed
	}
	return s.log.Read(off, func(r commitlog.Record) error {
		if err := s.checkPayload(r); err != nil {
			return err
		}
		return fn(viewOf(r))
	})
}
