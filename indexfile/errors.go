package indexfile

import (
	"fmt"

	"github.com/mqlite/mqlite/internal/errs"
)

// Sentinels. The shared ones are the same values as the root package's, so
// errors.Is matches whichever name a caller uses.
var (
	// ErrClosed is returned by every call after Close.
	ErrClosed = errs.ErrClosed
	// ErrCorrupt is matched by damage found in an index file (*CorruptError).
	ErrCorrupt = errs.ErrCorrupt
	// ErrInvalidArgument is matched by a bad input or bad Options.
	ErrInvalidArgument = errs.ErrInvalidArgument
	// ErrFenced is returned by Put and Flush after a sync failed: the
	// durable state is unknown, so writes stop until the Index is reopened.
	ErrFenced = errs.ErrFenced
	// ErrReadOnly is returned by Put, Flush, TruncateAfterPhys and
	// DeleteBelowPhys of an Index opened with Options.ReadOnly.
	ErrReadOnly = errs.ErrReadOnly
	// ErrIO is matched by a failed file operation (the error it wraps
	// tells which).
	ErrIO = errs.ErrIO
	// ErrDiskFull is matched by a file operation that failed for lack of
	// space (ENOSPC, EDQUOT, EFBIG).
	ErrDiskFull = errs.ErrDiskFull
	// ErrVersion is returned by Open for an index file whose magic is right
	// but whose format version is not FormatVersion (written by a newer, or
	// an unknown, mqlite). Open refuses such a directory instead of deleting
	// files another version may need. It does not match ErrCorrupt; it
	// matches ErrInvalidArgument, as the consume queue's ErrIncompatible
	// does, so that every error of a Store's Open matches a root sentinel.
	ErrVersion error = &kindError{msg: "mqlite/indexfile: unsupported index file format version", parent: errs.ErrInvalidArgument}
)

// kindError is a sentinel that refines a shared one.
type kindError struct {
	msg    string
	parent error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.parent }

// CorruptError locates damaged data; it matches ErrCorrupt.
type CorruptError = errs.CorruptError

func invalidf(format string, args ...any) error {
	return fmt.Errorf("mqlite/indexfile: %w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}
