package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/mqlite/mqlite/message"
)

// This file holds a queue's fetcher: the loop that waits for room in the
// cache, pulls from the store and delivers, and what it does when a pull
// fails.

// pullErrorBackoff is the pause after a failed Pull, as RocketMQ's
// pullTimeDelayMillsWhenException.
const pullErrorBackoff = time.Second

// waitRoom blocks until the pq may fetch, returning the position, the
// batch size and the seek generation; false once the fetcher must stop.
func (p *pq) waitRoom(ctx context.Context) (from int64, n int, gen uint64, ok bool) {
	paused := false
	for {
		p.mu.Lock()
		if !p.consumableLocked() {
			p.mu.Unlock()
			return 0, 0, 0, false
		}
		n, from, gen = p.roomLocked(), p.mu.next, p.mu.gen
		held := p.mu.paused
		p.mu.Unlock()
		if held {
			n = 0 // paused: wait for Resume (it signals space)
		} else if n > 0 {
			return from, n, gen, true
		}
		if !paused && !held {
			paused = true
			p.m.stats.flowControlled.Add(1)
		}
		p.giveBackInline()
		select {
		case <-p.space:
		case <-ctx.Done():
			return 0, 0, 0, false
		}
	}
}

// fetch is the pq's fetcher goroutine: it long-polls the store (Pull
// blocks until a message arrives) whenever flow control allows.
func (p *pq) fetch(ctx context.Context) {
	defer p.m.fetchers.Done()
	defer func() {
		p.giveBackInline()
		p.m.inlineCalls.Add(p.inline.calls)
	}()
	m := p.m
	ra := p.newReadAhead()
	defer ra.release(m)
	for {
		from, n, gen, ok := p.waitRoom(ctx)
		if !ok {
			return
		}
		pctx := ctx
		var cancel context.CancelFunc
		if m.kind == kindPull { // Seek interrupts a blocked Pull
			pctx, cancel = context.WithCancel(ctx)
			p.mu.Lock()
			if p.mu.gen != gen {
				p.mu.Unlock()
				cancel()
				continue
			}
			p.mu.pullCancel = cancel
			p.mu.Unlock()
		}
		if ra.src == nil || !ra.holds(gen, from) {
			p.giveBackInline() // the pull may wait for new messages
		}
		msgs, next, err := p.pull(pctx, ra, from, n, gen)
		interrupted := pctx.Err() != nil // before our own cancel below
		if cancel != nil {
			p.mu.Lock()
			p.mu.pullCancel = nil
			p.mu.Unlock()
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil && len(msgs) == 0 && next <= from {
			err = errors.New("store returned no message and no progress")
		}
		switch {
		case err == nil:
			p.deliver(gen, msgs, max(next, lastOffset(msgs)+1), len(msgs) == n)
		case interrupted: // by Seek
		case errors.Is(err, ErrClosed):
			m.log.Warn("mqlite/consumer: store closed; fetching stopped", "queue", p.q.String())
			return
		case len(msgs) > 0:
			// The messages before the entry that failed (a damaged record)
			// are good: deliver them; the next Pull starts at that entry and
			// fails there, with nothing else to lose.
			p.deliver(gen, msgs, max(next, lastOffset(msgs)+1), false)
			p.setFetchErr(err)
		case errors.Is(err, ErrNotFound):
			p.setFetchErr(err)
			if !p.skipToMin(gen, from) && !p.backoff(ctx) {
				return
			}
		case errors.Is(err, ErrCorrupt) && m.o.SkipDamaged && next >= from:
			p.setFetchErr(err)
			m.log.Warn("mqlite/consumer: skipping a damaged message", "queue", p.q.String(), "offset", next, "err", err)
			if p.skipTo(gen, from, next+1) {
				m.stats.skippedDamaged.Add(1)
			}
		default:
			p.setFetchErr(err)
			m.log.Warn("mqlite/consumer: pull failed", "queue", p.q.String(), "offset", from, "err", err)
			if !p.backoff(ctx) {
				return
			}
		}
	}
}

// setFetchErr records a failed Pull for QueueStats: it stays shown until
// a Pull delivers (deliver clears it) or a Seek.
func (p *pq) setFetchErr(err error) {
	p.m.stats.fetchErrors.Add(1)
	p.mu.Lock()
	p.mu.fetchErr = err
	p.mu.Unlock()
}

func lastOffset(msgs []*message.MessageExt) int64 {
	if len(msgs) == 0 {
		return -1
	}
	return msgs[len(msgs)-1].QueueOffset
}

// backoff waits pullErrorBackoff on the clock, or until a Seek (or room
// made in the cache) signals space; false if ctx ended.
func (p *pq) backoff(ctx context.Context) bool {
	p.giveBackInline()
	t := p.m.clk.NewTimer(pullErrorBackoff)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-p.space:
		return true
	case <-ctx.Done():
		return false
	}
}

// skipToMin moves a position that fell below the queue's min offset (the
// messages were deleted by retention) to the min, counting the skip.
func (p *pq) skipToMin(gen uint64, from int64) bool {
	minOff, err := p.m.st.MinOffset(p.q.Topic, p.q.ID)
	if err != nil || minOff <= from {
		p.m.log.Warn("mqlite/consumer: offset not found and min offset unusable", "queue", p.q.String(), "offset", from, "min", minOff, "err", err)
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.gen != gen || p.mu.next != from {
		return true
	}
	p.m.log.Warn("mqlite/consumer: offset below the queue's min; skipping to it", "queue", p.q.String(), "from", from, "min", minOff)
	p.m.stats.skipped.Add(minOff - from)
	p.moveLocked(minOff)
	return true
}

// skipTo moves a fetch position still at from (no Seek meanwhile) to to;
// false if it had moved.
func (p *pq) skipTo(gen uint64, from, to int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.gen != gen || p.mu.next != from {
		return false
	}
	p.moveLocked(to)
	return true
}

// moveLocked moves the fetch position forward to next, over offsets that
// will never be delivered, and lets the committed offset follow.
func (p *pq) moveLocked(next int64) {
	p.mu.next = next
	if p.m.kind == kindPull {
		if p.mu.msgs.len() == 0 {
			p.mu.delivered = next
		}
	} else {
		p.commitLocked()
	}
}
