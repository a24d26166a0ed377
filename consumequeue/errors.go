package consumequeue

import "github.com/mqlite/mqlite/internal/errs"

// The sentinel errors returned (wrapped) by this package. The first eight are
// the same values as mqlite's shared sentinels, so errors.Is matches whichever
// name a caller uses.
var (
	// ErrClosed: the Queue or Store was closed.
	ErrClosed = errs.ErrClosed
	// ErrCorrupt: a file failed a checksum or structural check. Errors that
	// locate the damage are *CorruptError values.
	ErrCorrupt = errs.ErrCorrupt
	// ErrNotFound: no entry at the given logical offset (outside [min, max)),
	// or no such queue.
	ErrNotFound = errs.ErrNotFound
	// ErrInvalidArgument: bad options, entry, offset or topic name.
	ErrInvalidArgument = errs.ErrInvalidArgument
	// ErrFenced: an earlier sync failed; the queue refuses writes until it
	// is reopened.
	ErrFenced = errs.ErrFenced
	// ErrReadOnly: a write to a queue or Store opened with
	// Options.ReadOnly.
	ErrReadOnly = errs.ErrReadOnly
	// ErrIO: a file operation failed (the error it wraps tells which).
	ErrIO = errs.ErrIO
	// ErrDiskFull: a file operation failed for lack of space (ENOSPC,
	// EDQUOT, EFBIG).
	ErrDiskFull = errs.ErrDiskFull

	// ErrConflict: Append was given an entry that does not fit the queue: a
	// re-dispatched entry that differs from the stored one, an offset past
	// the end of a non-empty queue, or an entry pointing backwards into the
	// CommitLog. It also matches ErrInvalidArgument.
	ErrConflict error = &kindError{msg: "mqlite: consume queue entry conflict", parent: errs.ErrInvalidArgument}
	// ErrIncompatible: the queue directory was written with another format
	// version or another EntriesPerFile than the options ask for. It also
	// matches ErrInvalidArgument.
	ErrIncompatible error = &kindError{msg: "mqlite: incompatible consume queue format", parent: errs.ErrInvalidArgument}
)

// CorruptError locates damaged data (file and byte offset). It matches
// ErrCorrupt.
type CorruptError = errs.CorruptError

// kindError is a sentinel that refines a shared one.
type kindError struct {
	msg    string
	parent error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.parent }
