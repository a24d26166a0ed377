package mqlite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/internal/errs"
)

// follower is a running ReplicateFrom.
type follower struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// DivergenceReport says what a replica cut from its CommitLog when it
// joined a primary whose history parted from its own (an old primary
// coming back as a replica): the bytes from From to To, holding Messages
// records, are gone, with their queue and index entries, and were never
// served again.
type DivergenceReport struct {
	From, To int64
	Messages int
}

// ReplicationStatus describes a replica's side of replication.
type ReplicationStatus struct {
	Role       Role
	Following  bool  // a ReplicateFrom is running
	End        int64 // this store's CommitLog end
	PrimaryEnd int64 // the primary's, as last heard by this process (0 if never)
	// LastCut is what the last divergence repair cut (zero if none).
	LastCut DivergenceReport
}

// ReplicationStatus reports the store's replication state.
func (s *Store) ReplicationStatus() ReplicationStatus {
	r := &s.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	return ReplicationStatus{Role: s.Role(), End: s.log.WrotePosition(), LastCut: r.mu.cut,
		Following: r.mu.follow != nil, PrimaryEnd: r.primaryEnd.Load()}
}

// ReplicateFrom makes this replica follow the primary at the other end
// of conn (whose side runs ServeReplica) until ctx ends, the stream fails,
// Promote or Close; it closes conn before it returns. It first sends where
// its CommitLog ends and the epochs it has seen; if the primary says its
// tail diverged, it cuts it (ReplicationStatus().LastCut) before taking
// the stream. Each chunk's CRC32-C and each record's frame are checked
// before the bytes are appended at the primary's offsets; with FlushSync
// they are flushed before they are acknowledged.
//
// It fails with ErrInvalidArgument on a primary, while another
// ReplicateFrom runs or while Promote runs, with ErrReplicaIdentity,
// ErrReplicaDiverged or ErrNotFound when the primary refuses it (nothing
// changed), and with ErrCorrupt for a damaged chunk (nothing of it
// written; reconnect to resume). Reconnecting is the caller's (package replication has a loop).
func (s *Store) ReplicateFrom(ctx context.Context, conn io.ReadWriteCloser) error {
	if err := s.enter(ctx, "replicate"); err != nil {
		return err
	}
	if conn == nil {
		return fmt.Errorf("mqlite: replicate: nil conn: %w", errs.ErrInvalidArgument)
	}
	f, fctx, err := s.repl.beginFollow(ctx, remoteAddr(conn))
	if err != nil {
		conn.Close()
		return err
	}
	defer s.repl.endFollow(f)
	stop := s.repl.watch(fctx, conn)
	err = s.follow(fctx, conn)
	stop()
	if ctx.Err() == nil && fctx.Err() != nil {
		select {
		case <-s.repl.quit:
			return errs.ErrClosed
		default:
			return fmt.Errorf("mqlite: replicate: stopped by Promote: %w", context.Canceled)
		}
	}
	return s.repl.sessionErr(ctx, err)
}

func (r *replication) beginFollow(ctx context.Context, addr string) (*follower, context.Context, error) {
	s := r.s
	if s.closed.Load() {
		return nil, nil, errs.ErrClosed
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.mu.closed:
		return nil, nil, errs.ErrClosed
	case !r.replica.Load():
		return nil, nil, fmt.Errorf("mqlite: replicate: %s is a primary (open it with Role Replica): %w", s.dir, errs.ErrInvalidArgument)
	case r.mu.follow != nil:
		return nil, nil, fmt.Errorf("mqlite: replicate: %s already follows a primary: %w", s.dir, errs.ErrInvalidArgument)
	case r.mu.promoting:
		return nil, nil, fmt.Errorf("mqlite: replicate: %s is being promoted: %w", s.dir, errs.ErrInvalidArgument)
	}
	fctx, cancel := context.WithCancel(ctx)
	f := &follower{cancel: cancel, done: make(chan struct{})}
	r.mu.follow = f
	r.mu.primaryAddr = addr
	r.wg.Add(1)
	return f, fctx, nil
}

func (r *replication) endFollow(f *follower) {
	f.cancel()
	r.mu.Lock()
	r.mu.follow = nil
	r.mu.Unlock()
	close(f.done)
	r.wg.Done()
}

func (s *Store) follow(ctx context.Context, conn io.ReadWriteCloser) error {
	br := bufio.NewReaderSize(conn, 256<<10)
	r := &s.repl
	r.mu.Lock()
	e := r.mu.epochs
	r.mu.Unlock()
	end := s.log.WrotePosition()
	h := hello{syncAck: s.opts.Flush == FlushSync, id: e.id, segment: s.opts.SegmentSize, end: end, epochs: e.epochs}
	if err := writeHello(conn, h); err != nil {
		return fmt.Errorf("mqlite: replicate: hello: %w", err)
	}
	rp, err := readReply(br)
	if err != nil {
		return fmt.Errorf("mqlite: replicate: reply: %w", err)
	}
	if err := rp.status.err(); err != nil {
		return err
	}
	if rp.segment != s.opts.SegmentSize || !e.id.isZero() && rp.id != e.id {
		return fmt.Errorf("mqlite: replicate: the primary answered for another store: %w", ErrReplicaIdentity)
	}
	if rp.start > end && end == 0 && s.log.MinOffset() == 0 {
		// A new replica of a primary whose retention removed its first
		// segments: the log starts where the primary's does.
		if err := s.restartAt(rp.start); err != nil {
			return err
		}
		end = rp.start
	}
	if rp.start > end {
		return fmt.Errorf("mqlite: replicate: the primary resumes at %d, past this log's end %d: %w", rp.start, end, ErrReplicaDiverged)
	}
	if rp.start < end {
		if err := s.cutTail(rp.start); err != nil {
			return err
		}
	}
	if err := r.adoptEpochs(rp.id, rp.epochs); err != nil {
		return err
	}
	r.primaryEnd.Store(max(r.primaryEnd.Load(), rp.start))
	return s.receive(ctx, br, conn, rp.epochs)
}

// adoptEpochs records the primary's ID and the epochs of its history that
// this log has reached.
func (r *replication) adoptEpochs(id StoreID, primary []Epoch) error {
	end := r.s.log.WrotePosition()
	r.mu.Lock()
	defer r.mu.Unlock()
	e := epochState{id: id}
	for _, ep := range primary {
		if ep.Start <= end {
			e.epochs = append(e.epochs, ep)
		}
	}
	if r.mu.found && e.id == r.mu.epochs.id && epochsEqual(e.epochs, r.mu.epochs.epochs) {
		return nil
	}
	if err := saveEpochs(r.s.fs, r.s.dir, e); err != nil {
		return err
	}
	r.mu.epochs, r.mu.found = e, true
	return nil
}

func epochsEqual(a, b []Epoch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// receive appends the chunks the primary streams and acknowledges them.
func (s *Store) receive(ctx context.Context, br *bufio.Reader, w io.Writer, primary []Epoch) error {
	limit := int(s.opts.SegmentSize)
	var buf []byte
	last := map[string][]byte{}
	known := s.repl.epochCount()
	for {
		indexed := false // this frame's records dispatched from its bytes (dispatch_chunk.go)
		fr, body, err := readFrame(br, buf, limit)
		buf = body
		if err != nil {
			return fmt.Errorf("mqlite: replicate: %w", err)
		}
		if !fr.unchecked {
			s.repl.primaryEnd.Store(fr.primaryEnd)
		}
		switch fr.kind {
		case frameMeta:
			if err := s.applyMetadata(body, last); err != nil {
				return err
			}
			s.repl.saveState(fr.primaryEnd)
		case frameChunk:
			if len(body) > 0 {
				if err := s.appendChunk(fr, body); err != nil {
					return err
				}
				indexed = len(body) >= chunkDispatchMin && s.disp.dispatchChunk(fr.offset, body)
				s.repl.primaryEnd.Store(fr.primaryEnd) // checked with the chunk
				if known < len(primary) && primary[known].Start <= s.log.WrotePosition() {
					if err := s.repl.adoptEpochs(s.repl.epochID(), primary); err != nil {
						return err
					}
					known = s.repl.epochCount()
				}
			}
		}
		if br.Buffered() > 0 {
			if !indexed {
				s.disp.notify()
			}
			continue // acknowledge once caught up with what arrived: one ack for many chunks
		}
		if err := writeAck(w, s.log.WrotePosition(), s.log.FlushedPosition()); err != nil {
			return fmt.Errorf("mqlite: replicate: ack: %w", err)
		}
		// After the ack: a sync send on the primary waits for the ack, not
		// for indexing. A small backlog (a replica keeping up) is
		// dispatched here, without waking the loop (dispatch_inline.go).
		s.disp.notifySender()
	}
}

func (r *replication) epochID() StoreID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.epochs.id
}

func (r *replication) epochCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mu.epochs.epochs)
}

// appendChunk appends one chunk of the primary's CommitLog at its
// offset, checking its frame's CRC with its records'.
func (s *Store) appendChunk(fr frame, b []byte) error {
	off := fr.offset
	if end := s.log.WrotePosition(); off != end {
		return fmt.Errorf("mqlite: replicate: chunk at %d, the log ends at %d: %w", off, end, errs.ErrCorrupt)
	}
	if _, err := s.log.AppendRawSum(off, b, fr.seed, fr.crc); err != nil {
		return fmt.Errorf("mqlite: replicate: %w", err)
	}
	if s.opts.Flush == FlushSync {
		if _, err := s.log.Flush(); err != nil {
			return fmt.Errorf("mqlite: replicate: flush: %w", err)
		}
	}
	return nil // receive wakes the dispatcher
}

// restartAt makes this empty replica's CommitLog start at start, and its
// dispatcher with it.
func (s *Store) restartAt(start int64) error {
	d := s.disp
	d.run.Lock()
	defer d.run.Unlock()
	if err := s.log.RestartAt(start); err != nil {
		return fmt.Errorf("mqlite: replicate: start the log at %d: %w", start, err)
	}
	d.next = start
	d.mu.Lock()
	d.mu.dispatched = start
	d.published.Store(start)
	d.mu.Unlock()
	return nil
}

// cutTail cuts the CommitLog back to to, with the queue and index entries
// of what goes, and records what was cut.
func (s *Store) cutTail(to int64) error {
	from := s.log.WrotePosition()
	if !s.log.IsBoundary(to) {
		return fmt.Errorf("mqlite: replicate: the primary resumes at %d, not a record boundary of this log: %w", to, ErrReplicaDiverged)
	}
	n := 0
	if _, err := s.log.Scan(to, from, true, func(commitlog.Record) error { n++; return nil }); err != nil {
		return fmt.Errorf("mqlite: replicate: count the records to cut: %w", err)
	}
	d := s.disp
	d.run.Lock()
	err := s.log.TruncateTo(to)
	if err == nil {
		err = errors.Join(d.cq.TruncateAfterPhys(to), d.idx.TruncateAfterPhys(to))
	}
	if err == nil {
		// The IndexFile drops whole files past the cut: re-dispatch
		// from its end, as Open does (the ConsumeQueue takes the
		// entries it holds again unchanged).
		d.next = max(min(d.next, to, d.idx.EndPhyOffset()), s.log.MinOffset())
		d.mu.Lock()
		d.mu.dispatched = min(d.mu.dispatched, d.next)
		d.published.Store(d.mu.dispatched)
		d.mu.Unlock()
	}
	d.run.Unlock()
	if err != nil {
		return fmt.Errorf("mqlite: replicate: cut the diverged tail at %d: %w", to, err)
	}
	cp, err := s.currentCheckpoint()
	if err == nil {
		err = s.writeCheckpoint(cp)
	}
	if err != nil {
		return err
	}
	rep := DivergenceReport{From: to, To: from, Messages: n}
	s.repl.mu.Lock()
	s.repl.mu.cut = rep
	s.repl.mu.Unlock()
	s.lossLog.Warn("mqlite: replicate: cut the CommitLog tail the new primary does not have",
		"from", to, "to", from, "bytes", from-to, "messages", n)
	return nil
}
