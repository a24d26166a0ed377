package mqlite

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/internal/errs"
)

// session is a primary's side of one replica's stream.
type session struct {
	id      int
	kick    chan struct{} // cap 1: new bytes to ship
	syncAck bool          // the replica acknowledges flushed bytes
	written atomic.Int64  // the replica's acknowledged end
	flushed atomic.Int64
	acks    atomic.Int64 // acknowledgements received
	ready   atomic.Bool  // streaming (counts for sync sends)
}

func (ss *session) acked() int64 {
	if ss.syncAck {
		return ss.flushed.Load()
	}
	return ss.written.Load()
}

// ServeReplica serves one replica over conn until the replica goes, ctx
// ends or the Store is closed, and closes conn before it returns. The
// replica (ReplicateFrom at the other end) says where its CommitLog ends
// and what epochs it has seen; the primary answers where it must resume
// (after cutting a diverged tail) or refuses it, then streams its
// CommitLog from there in chunks, a heartbeat when idle, and its metadata
// every ReplicationOptions.MetadataInterval. Serve several replicas with
// one call each, concurrently. conn is any reliable byte stream: a
// net.Conn (TLS is the caller's choice of conn), a net.Pipe in tests.
//
// It returns the reason the session ended: ctx's error, ErrClosed, the
// stream's error, or the refusal it sent (ErrReplicaIdentity,
// ErrReplicaDiverged, ErrNotFound when retention removed what the replica
// needs). ErrReplica on a replica: replicas do not serve replicas.
func (s *Store) ServeReplica(ctx context.Context, conn io.ReadWriteCloser) error {
	if err := s.enter(ctx, "serve replica"); err != nil {
		return err
	}
	if conn == nil {
		return fmt.Errorf("mqlite: serve replica: nil conn: %w", errs.ErrInvalidArgument)
	}
	if err := s.writable("serve replica"); err != nil {
		conn.Close()
		return err
	}
	if !s.repl.start() {
		conn.Close()
		return errs.ErrClosed
	}
	defer s.repl.wg.Done()
	stop := s.repl.watch(ctx, conn)
	err := s.serve(ctx, conn)
	stop()
	return s.repl.sessionErr(ctx, err)
}

// watch closes conn when ctx ends or the Store closes; call the returned
// function (which also closes conn) when done with it.
func (r *replication) watch(ctx context.Context, conn io.Closer) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-ctx.Done():
		case <-r.quit:
		case <-done:
		}
		conn.Close()
	}()
	return func() {
		close(done)
		<-exited
	}
}

// sessionErr says why a session ended: the context or Close before the
// stream's error they caused.
func (r *replication) sessionErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	select {
	case <-r.quit:
		return errs.ErrClosed
	default:
	}
	return err
}

func (s *Store) serve(ctx context.Context, conn io.ReadWriteCloser) error {
	br := bufio.NewReader(conn)
	bw := bufio.NewWriterSize(conn, 64<<10)
	h, err := readHello(br)
	if err != nil {
		return fmt.Errorf("mqlite: serve replica: hello: %w", err)
	}
	rp, err := s.repl.answer(h)
	if err != nil {
		return err
	}
	if err := writeReply(bw, rp); err != nil {
		return fmt.Errorf("mqlite: serve replica: reply: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("mqlite: serve replica: reply: %w", err)
	}
	if err := rp.status.err(); err != nil {
		return err
	}
	ss := &session{kick: make(chan struct{}, 1), syncAck: h.syncAck}
	ss.written.Store(rp.start)
	ss.flushed.Store(min(rp.start, h.end))
	s.repl.attach(ss)
	defer s.repl.detach(ss)
	var ackErr error
	ackDone := make(chan struct{})
	go func() {
		defer close(ackDone)
		ackErr = s.repl.readAcks(br, ss)
	}()
	ss.ready.Store(true)
	sd := &sender{bw: bw, conn: conn, rd: s.log.NewRawReader()}
	err = s.stream(ctx, sd, ss, rp.start, ackDone)
	if sd.rd != nil {
		if cerr := sd.rd.Close(); cerr != nil {
			s.opts.Logger.Warn("mqlite: serve replica: close a segment file", "err", cerr)
		}
	}
	conn.Close() // ends readAcks
	<-ackDone
	if err == nil {
		err = ackErr
	}
	return err
}

// answer decides what to tell a replica's hello.
func (r *replication) answer(h hello) (reply, error) {
	e, err := r.ensureEpochs()
	if err != nil {
		return reply{}, err
	}
	s := r.s
	end := s.log.WrotePosition()
	rp := reply{id: e.id, segment: s.opts.SegmentSize, epochs: e.epochs}
	switch {
	case h.segment != s.opts.SegmentSize:
		rp.status = replyIdentity
	case h.id.isZero():
		if h.end != 0 || len(h.epochs) > 0 {
			rp.status = replyIdentity // a store with data and no ID: not ours
		}
		// A new replica starts where this log now starts (RestartAt).
		rp.start = s.log.MinOffset()
	case h.id != e.id:
		rp.status = replyIdentity
	default:
		rp.start, rp.status = divergence(e, h, end)
	}
	switch {
	case rp.status != replyOK:
	case rp.start < s.log.MinOffset():
		rp.status = replyGone
	case !s.log.IsBoundary(rp.start):
		rp.status = replyDiverged // the same epochs, but not where a record of ours starts
	}
	return rp, nil
}

// divergence finds where a replica's log must resume: the end of the
// newest epoch both histories have with the same start, as far as both
// logs hold it. The replica cuts its log back to it if it is below its
// end.
func divergence(p epochState, h hello, end int64) (int64, replyStatus) {
	rs := h.epochs
	if len(rs) == 0 {
		if h.end == 0 {
			return 0, replyOK
		}
		return 0, replyDiverged
	}
	last := p.last()
	for i := len(rs) - 1; i >= 0; i-- {
		j := slices.IndexFunc(p.epochs, func(e Epoch) bool { return e.Number == rs[i].Number })
		if j < 0 || p.epochs[j].Start != rs[i].Start {
			continue
		}
		if rs[len(rs)-1].Number > last.Number {
			return 0, replyDiverged // the replica knows a newer primary than this one
		}
		endR := h.end
		if i+1 < len(rs) {
			endR = rs[i+1].Start
		}
		endP := p.endOf(j, end)
		if i == len(rs)-1 && j == len(p.epochs)-1 && h.end > end {
			return 0, replyAhead
		}
		return min(endR, endP, h.end), replyOK
	}
	return 0, replyDiverged
}

// ensureEpochs gives a primary its epoch file on first use: a new ID and
// epoch 1 from offset 0.
func (r *replication) ensureEpochs() (epochState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.found && len(r.mu.epochs.epochs) > 0 {
		return r.mu.epochs, nil
	}
	e := r.mu.epochs
	if e.id.isZero() {
		id, err := newStoreID()
		if err != nil {
			return e, err
		}
		e.id = id
	}
	if len(e.epochs) == 0 {
		e.epochs = []Epoch{{Number: 1, Start: 0}}
	}
	if err := saveEpochs(r.s.fs, r.s.dir, e); err != nil {
		return r.mu.epochs, err
	}
	r.mu.epochs, r.mu.found = e, true
	return e, nil
}

// readAcks records a replica's acknowledgements until the stream fails.
func (r *replication) readAcks(br *bufio.Reader, ss *session) error {
	for {
		w, f, err := readAck(br)
		if err != nil {
			return fmt.Errorf("mqlite: serve replica: ack: %w", err)
		}
		if end := r.s.log.WrotePosition(); w > end || f > w || w < ss.written.Load() {
			return fmt.Errorf("mqlite: serve replica: ack of %d (flushed %d) after %d, the log ends at %d: %w",
				w, f, ss.written.Load(), end, errs.ErrCorrupt)
		}
		ss.written.Store(w)
		ss.flushed.Store(f)
		ss.acks.Add(1)
		r.ackArrived()
	}
}

// sender writes frames to a replica: a chunk goes to the conn in one
// writev on a TCP conn (net.Buffers), its header and its body, without a
// copy through bw; metadata and heartbeats go through bw, flushed before
// the next chunk. A large chunk (catching up) is read from the segment
// file into rd's buffer (commitlog.RawReader), a small one (keeping up)
// is sent straight from the CommitLog's mapping.
type sender struct {
	bw   *bufio.Writer
	conn io.Writer
	rd   *commitlog.RawReader // nil: every chunk from the mapping
	hdr  [frameHeader]byte
	bufs net.Buffers
}

// readChunkMin is the backlog from which the sender reads a chunk with
// the RawReader: below it, the few records a sync send waits for go
// from the mapping, where they are still in the CPU's cache.
const readChunkMin = 64 << 10

// chunk sends the CommitLog from next (at most limit bytes, or one whole
// record); it returns where the next chunk starts.
func (sd *sender) chunk(s *Store, next, end int64, limit int) (int64, error) {
	var n int64
	var err error
	if sd.rd != nil && end-next >= readChunkMin {
		var b []byte
		if b, n, err = sd.rd.Read(next, limit); err == nil && len(b) > 0 {
			err = sd.send(next, end, b)
		}
	} else {
		n, err = s.log.ViewRaw(next, limit, func(b []byte) error { return sd.send(next, end, b) })
	}
	if err != nil {
		return next, fmt.Errorf("mqlite: serve replica: send the CommitLog at %d: %w", next, err)
	}
	return n, nil
}

// send writes the chunk b, the CommitLog from next; end is the log's end
// read before.
func (sd *sender) send(next, end int64, b []byte) error {
	// The chunk may reach past end (the log grew since): the primary's
	// end is at least what is sent.
	primaryEnd := max(end, next+int64(len(b)))
	putFrameHeader(sd.hdr[:], frame{kind: frameChunk, offset: next, primaryEnd: primaryEnd}, b)
	if sd.bw.Buffered() > 0 {
		if err := sd.bw.Flush(); err != nil {
			return err
		}
	}
	sd.bufs = append(sd.bufs[:0], sd.hdr[:], b)
	bufs := sd.bufs // WriteTo consumes its receiver
	_, err := bufs.WriteTo(sd.conn)
	return err
}

// stream ships the CommitLog from next on, heartbeats and metadata, until
// an error; nil when the ack reader stopped (ackDone), whose error counts.
func (s *Store) stream(ctx context.Context, sd *sender, ss *session, next int64, ackDone <-chan struct{}) error {
	o := &s.opts.Replication
	beat := s.opts.Clock.NewTicker(o.Heartbeat)
	defer beat.Stop()
	meta := s.opts.Clock.NewTicker(o.MetadataInterval)
	defer meta.Stop()
	bw := sd.bw
	if err := s.sendMetadata(bw); err != nil {
		return err
	}
	for {
		end := s.log.WrotePosition()
		if next < end {
			var err error
			if next, err = sd.chunk(s, next, end, o.ChunkSize); err != nil {
				return err
			}
			continue
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("mqlite: serve replica: send: %w", err)
		}
		// The sends' dispatch, while their chunk travels (replica_await.go).
		s.disp.notifySender()
		var err error
		select {
		case <-ss.kick:
			// Let the sends that woke with this one (released by
			// the same ack) append first: one chunk, one ack for all.
			runtime.Gosched()
		case <-beat.C():
			err = writeFrame(bw, frameChunk, next, end, nil)
		case <-meta.C():
			err = s.sendMetadata(bw)
			s.repl.saveState(0)
		case <-ackDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-s.repl.quit:
			return errs.ErrClosed
		}
		if err != nil {
			return fmt.Errorf("mqlite: serve replica: send: %w", err)
		}
	}
}
