package mqlite

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/filter"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// DroppedRange is a part of a damaged store's CommitLog that Salvage did
// not copy.
type DroppedRange struct {
	Path     string // the segment file
	Pos      int64  // where the range starts in that file
	From, To int64  // the range [From, To) in CommitLog offsets
	Reason   string // what is wrong there
}

// String describes the range with its file, offsets and reason.
func (d DroppedRange) String() string {
	return fmt.Sprintf("%s at %d: commitlog offsets [%d, %d) (%d bytes): %s", d.Path, d.Pos, d.From, d.To, d.To-d.From, d.Reason)
}

// SalvagedOffset is a committed consumer offset of the damaged store and
// the offset of the new store it became: the queue offsets of the new
// store are dense, so they shift past dropped and skipped records.
type SalvagedOffset struct {
	Group, Topic string
	Queue        int
	From, To     int64
}

// SalvageReport says what Salvage copied and what it left behind.
type SalvageReport struct {
	Copied int64 // records copied into the new store
	// Dropped lists the damaged parts of the CommitLog that were not
	// copied, in order: ranges of invalid bytes, and records whose frame
	// and checksum are valid but whose message cannot be decoded.
	Dropped []DroppedRange
	// Skipped counts, by topic, the good records Salvage leaves out on
	// purpose: copies of delayed and timer messages that were already
	// delivered (their delivered message is copied), and the records of
	// the transaction topics (see Salvage).
	Skipped map[string]int64
	// Offsets are the committed consumer offsets of clustering groups
	// translated to the new store's queue offsets (and applied there).
	Offsets []SalvagedOffset
}

// OK reports that nothing was dropped.
func (r SalvageReport) OK() bool { return len(r.Dropped) == 0 }

// Salvage copies every good record of the store in src, which may be
// damaged (an Open of it may fail with ErrCorrupt), into a new store in
// dst, and reports what it could not copy. src is opened read-only
// (opts.ReadOnly is implied) and nothing in it changes; dst must not hold
// a store yet and is created with opts (ReadOnly cleared). It walks the
// CommitLog from its first to its last valid record, checking each
// record (frame, stored offset, CRC32-C, message structure); after
// damage it resumes at the next valid record of the segment, or at the
// next segment, as Verify does, and reports the bytes in between.
//
// What the new store holds: the topics of src with their queue counts,
// and each good message of a user, retry or DLQ topic in its topic and
// queue, in CommitLog order, with its body (uncompressed), tags, keys,
// properties, unique key and born time. A message gets a new CommitLog
// offset (so a new message ID), a new store time and a dense queue offset
// (Offsets maps the committed offsets of clustering groups; those groups
// are created in dst with their subscriptions). A delayed or timer
// message not yet delivered is stored delayed again, its delay counted
// from the salvage; one already delivered is skipped (its delivery is
// copied). Transaction records (half messages and their decisions) are
// skipped: a transaction still pending in src is lost, which Skipped
// shows; committed ones were copied as their real messages.
//
// The error is for what stops the salvage (src unreadable as a whole,
// dst not creatable or failing); damage is in the report, and
// SalvageReport.OK says whether anything was dropped.
func Salvage(ctx context.Context, src, dst string, opts *Options) (SalvageReport, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	ro := o
	ro.ReadOnly = true
	from, err := Open(src, &ro)
	if err != nil {
		return SalvageReport{}, fmt.Errorf("mqlite: salvage: open %s read-only: %w", src, err)
	}
	defer from.Close()
	wo := o
	wo.ReadOnly = false
	if _, isDir, err := from.fs.Stat(dst); err == nil && isDir {
		if names, _ := from.fs.ReadDir(dst); len(names) > 0 {
			return SalvageReport{}, fmt.Errorf("mqlite: salvage into %s: the directory is not empty: %w", dst, errs.ErrInvalidArgument)
		}
	}
	to, err := Open(dst, &wo)
	if err != nil {
		return SalvageReport{}, fmt.Errorf("mqlite: salvage: create %s: %w", dst, err)
	}
	sv := &salvager{ctx: ctx, src: from, dst: to, rep: SalvageReport{Skipped: map[string]int64{}}, copied: map[qkey][]int64{}}
	err = sv.run()
	if cerr := to.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("mqlite: salvage: close %s: %w", dst, cerr)
	}
	return sv.rep, err
}

// qkey names a queue.
type qkey struct {
	topic string
	queue int
}

// salvager holds one Salvage run.
type salvager struct {
	ctx      context.Context
	src, dst *Store
	rep      SalvageReport
	copied   map[qkey][]int64 // the src queue offsets copied, in order
	err      error            // what stopped the copy in a Scan callback
}

// errStopCopy ends a Scan whose callback failed (salvager.err says why).
var errStopCopy = errors.New("salvage stopped")

func (sv *salvager) run() error {
	for _, ti := range sv.src.Topics() {
		if _, err := sv.dst.topics.Ensure(ti.Name, ti.Config, ti.System); err != nil {
			return fmt.Errorf("mqlite: salvage: topic %s: %w", ti.Name, err)
		}
	}
	v := &verifier{s: sv.src, to: sv.src.log.WrotePosition()}
	next := sv.src.log.MinOffset()
	for next < v.to {
		if err := sv.ctx.Err(); err != nil {
			return err
		}
		n, err := sv.src.log.Scan(next, v.to, true, sv.copy)
		var ce *CorruptError
		switch {
		case err == nil:
			next = n
		case errors.Is(err, errStopCopy):
			return sv.err
		case errors.As(err, &ce):
			resume, _ := v.resync(n, ce)
			resume = min(resume, v.to)
			sv.drop(n, resume, ce.Reason)
			next = resume
		default:
			return fmt.Errorf("mqlite: salvage: read commitlog at offset %d: %w", n, err)
		}
	}
	if t := sv.src.log.Report().Torn; t[1] > t[0] {
		sv.drop(t[0], t[1], "the last record is cut short or damaged, and no valid record follows (a torn tail)")
	}
	if err := sv.dst.WaitVisible(sv.ctx); err != nil {
		return fmt.Errorf("mqlite: salvage: index the copies: %w", err)
	}
	return sv.offsets()
}

// drop reports the CommitLog range [from, to) as not copied.
func (sv *salvager) drop(from, to int64, reason string) {
	path, pos := sv.src.log.Locate(from)
	sv.rep.Dropped = append(sv.rep.Dropped, DroppedRange{Path: path, Pos: pos, From: from, To: to, Reason: reason})
}

// copy copies one record whose frame and checksum are valid.
func (sv *salvager) copy(r commitlog.Record) error {
	ext := &MessageExt{}
	err := message.CheckPayload(r.Payload)
	if err == nil {
		err = message.DecodeAt(r.Payload, r.Offset, ext)
	}
	if err == nil {
		err = message.Inflate(&ext.Message, sv.src.opts.MaxMessageSize)
	}
	if err != nil {
		sv.drop(r.Offset, r.Offset+int64(r.Size), "message: "+err.Error())
		return nil
	}
	m, queue := &ext.Message, int(ext.QueueID)
	switch {
	case m.Topic == topic.Schedule || m.Topic == topic.Timer:
		real, q, err := fromSchedule(m)
		if err != nil {
			sv.drop(r.Offset, r.Offset+int64(r.Size), "delayed message: "+err.Error())
			return nil
		}
		done, err := sv.src.hasUniqKey(real.Topic, real.UniqKey, ext.StoreTimestamp, sameAttempt(real))
		if err != nil {
			return sv.stop(fmt.Errorf("mqlite: salvage: look up the delivery of the delayed message at %d: %w", r.Offset, err))
		}
		if done {
			sv.rep.Skipped[m.Topic]++
			return nil
		}
		real.DelayLevel, real.DeliverAt = m.DelayLevel, m.DeliverAt
		m, queue = real, q
	case topic.IsSystem(m.Topic) && !strings.HasPrefix(m.Topic, topic.RetryPrefix) && !strings.HasPrefix(m.Topic, topic.DLQPrefix):
		sv.rep.Skipped[m.Topic]++
		return nil
	}
	if _, err := sv.dst.append(sv.ctx, m, queue, true, false); err != nil {
		return sv.stop(fmt.Errorf("mqlite: salvage: copy the message at commitlog offset %d (%s/%d@%d): %w",
			r.Offset, ext.Topic, ext.QueueID, ext.QueueOffset, err))
	}
	k := qkey{ext.Topic, int(ext.QueueID)}
	sv.copied[k] = append(sv.copied[k], ext.QueueOffset)
	sv.rep.Copied++
	return nil
}

func (sv *salvager) stop(err error) error {
	sv.err = err
	return errStopCopy
}

// offsets re-creates the clustering groups of src in dst and translates
// their committed offsets: the new offset is the number of copied
// records of the queue below the old one.
func (sv *salvager) offsets() error {
	for _, g := range sv.src.ConsumerGroups() {
		if g.Model != Clustering {
			continue
		}
		offs, err := sv.src.ConsumerOffsets(g.Name)
		if err != nil {
			return fmt.Errorf("mqlite: salvage: offsets of group %s: %w", g.Name, err)
		}
		if err := sv.joinGroup(g); err != nil {
			return err
		}
		for _, o := range offs {
			cp := sv.copied[qkey{o.Topic, o.ID}]
			n := int64(sort.Search(len(cp), func(i int) bool { return cp[i] >= o.Offset }))
			sv.rep.Offsets = append(sv.rep.Offsets, SalvagedOffset{Group: g.Name, Topic: o.Topic, Queue: o.ID, From: o.Offset, To: n})
			if err := sv.dst.SetConsumerOffset(g.Name, o.Topic, o.ID, n); err != nil {
				return fmt.Errorf("mqlite: salvage: set the offset of group %s on %s/%d: %w", g.Name, o.Topic, o.ID, err)
			}
		}
	}
	return nil
}

// joinGroup creates group g in dst as a member joining would (its options
// and subscriptions), and leaves it without members.
func (sv *salvager) joinGroup(g GroupInfo) error {
	c, err := sv.dst.NewPullConsumer(g.Name, ConsumerOptions{Model: g.Model, Strategy: g.Strategy,
		ConsumeFromWhere: g.ConsumeFromWhere, MaxReconsumeTimes: g.MaxReconsumeTimes})
	if err != nil {
		return fmt.Errorf("mqlite: salvage: group %s: %w", g.Name, err)
	}
	for _, sub := range g.Subscriptions {
		var f Filter
		switch sub.FilterType {
		case "":
		case filter.TypeSQL92:
			f, err = filter.SQL(sub.Expression)
		default:
			f, err = filter.Tag(sub.Expression)
		}
		if err == nil {
			err = c.Subscribe(sub.Topic, f)
		}
		if err != nil {
			c.Close()
			return fmt.Errorf("mqlite: salvage: group %s: subscribe %s (%s %q): %w", g.Name, sub.Topic, sub.FilterType, sub.Expression, err)
		}
	}
	if err := c.Close(); err != nil {
		return fmt.Errorf("mqlite: salvage: group %s: %w", g.Name, err)
	}
	return nil
}
