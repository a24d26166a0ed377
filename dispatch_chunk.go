package mqlite

import "github.com/mqlite/mqlite/commitlog"

// Indexing a replica's large chunks from the bytes it received. A replica
// catching up appends chunks of 64 KiB or more with one pwrite
// (commitlog.Options.RawThrough): the bytes reach the page cache but not
// the mapping, and the dispatcher reading each record back through the
// mapping faulted every page in again (about a quarter of the replica's
// CPU). The receiving goroutine still holds the chunk, its frames and
// CRCs checked on arrival, so it dispatches it from there, as the loop
// would: same batch, same order, same published progress, under run.
// Small chunks (a replica keeping up) are left to the loop and to
// notifySender, which read them through the warmed mapping.

// chunkDispatchMin is the smallest chunk the receiver dispatches itself:
// the size from which the CommitLog writes a raw chunk with pwrite.
const chunkDispatchMin = 64 << 10

// dispatchChunk dispatches the records of b, a chunk just appended at
// CommitLog offset off, if the dispatcher has dispatched everything
// before it and b is confirmed (flushed, under FlushSync). It reports
// whether it did; when it did not, or it failed (the loop then retries
// the same records through the mapping and reports the error), the
// caller wakes the loop.
func (d *dispatcher) dispatchChunk(off int64, b []byte) bool {
	end := off + int64(len(b))
	d.run.Lock()
	defer d.run.Unlock()
	if d.stopped || d.verify || d.next != off || d.confirmed() < end || d.failure() != nil {
		return false
	}
	next, err := commitlog.Records(off, b, func(r commitlog.Record) error {
		d.chunked++
		return d.dispatch(r)
	})
	return d.publish(next, err) == nil && d.next == end
}
