// Package errs holds the sentinel errors shared by every mqlite package.
// The root package and the public sub-packages re-export these same values,
// so errors.Is matches whichever name a caller uses.
package errs

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

var (
	// ErrClosed: the store or handle was closed.
	ErrClosed = errors.New("mqlite: closed")
	// ErrCorrupt: stored data failed a checksum or structural check.
	ErrCorrupt = errors.New("mqlite: corrupt data")
	// ErrNotFound: no message, file or entry at the given position.
	ErrNotFound = errors.New("mqlite: not found")
	// ErrDiskFull: the disk has no room (or passed the configured limit).
	ErrDiskFull = errors.New("mqlite: disk full")
	// ErrFenced: an earlier write or sync failed; writes are refused until
	// the store is reopened.
	ErrFenced = errors.New("mqlite: store fenced after an I/O failure")
	// ErrFlushTimeout: the record is stored but was not flushed in time.
	ErrFlushTimeout = errors.New("mqlite: flush timeout")
	// ErrMessageTooLarge: a body or record exceeds the size limit.
	ErrMessageTooLarge = errors.New("mqlite: message too large")
	// ErrInvalidArgument: a bad input, options or message.
	ErrInvalidArgument = errors.New("mqlite: invalid argument")
	// ErrLocked: the directory is held by another Store.
	ErrLocked = errors.New("mqlite: directory locked by another store")
	// ErrTopicNotFound: the topic does not exist (and auto-create is off).
	ErrTopicNotFound = errors.New("mqlite: topic not found")
	// ErrTopicExists: CreateTopic of a topic that already exists.
	ErrTopicExists = errors.New("mqlite: topic exists")
	// ErrFlowControl: the store or a handle is under pressure and refused
	// the call instead of queueing without bound; retry later.
	ErrFlowControl = errors.New("mqlite: flow control")
	// ErrGroupNotFound: no such consumer group.
	ErrGroupNotFound = errors.New("mqlite: consumer group not found")
	// ErrReadOnly: a write to a store (or file) opened read-only.
	ErrReadOnly = errors.New("mqlite: opened read-only")
	// ErrOffsetOutOfRange: a read from a queue offset past the next one
	// the queue will assign (Kafka's OffsetOutOfRange, RocketMQ's
	// OFFSET_OVERFLOW_BADLY).
	ErrOffsetOutOfRange = errors.New("mqlite: offset out of range")
	// ErrGroupActive: an offset reset of a consumer group that has live
	// (or still stopping) members, which would overwrite it (Kafka's
	// NON_EMPTY_GROUP).
	ErrGroupActive = errors.New("mqlite: consumer group has live members")
)

// CorruptError locates damaged data. It matches ErrCorrupt.
type CorruptError struct {
	Path   string // file
	Offset int64  // byte position inside the file, or a global offset
	Reason string
}

// Error names the file, the offset and what is wrong there.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("mqlite: corrupt data in %s at offset %d: %s", e.Path, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Corrupt returns a *CorruptError.
func Corrupt(path string, off int64, format string, args ...any) error {
	return &CorruptError{Path: path, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// ErrIO: a read, write or sync failed, or a mapped file faulted.
var ErrIO = errors.New("mqlite: I/O error")

// Disk types err, the failure of a file operation, for the callers of a
// package that got it from the file seam: the result matches ErrDiskFull
// when the disk has no room (ENOSPC, EDQUOT, EFBIG) and ErrIO otherwise,
// and still matches err. An err that already matches one of the sentinels
// an I/O path returns (ErrIO, ErrDiskFull, ErrFenced, ErrCorrupt,
// ErrReadOnly, ErrClosed) is returned as it is; so is nil.
func Disk(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrIO), errors.Is(err, ErrDiskFull), errors.Is(err, ErrFenced),
		errors.Is(err, ErrCorrupt), errors.Is(err, ErrReadOnly), errors.Is(err, ErrClosed):
		return err
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return fmt.Errorf("%w (%w)", ErrDiskFull, err)
	}
	return fmt.Errorf("%w (%w)", ErrIO, err)
}

// CheckContext returns an error matching ErrInvalidArgument when ctx is
// nil, naming op (which carries its package prefix, e.g.
// "mqlite/producer: send"); otherwise nil. Every exported call that takes
// a context checks it first, so a nil ctx is an error, not a panic.
func CheckContext(ctx context.Context, op string) error {
	if ctx == nil {
		return fmt.Errorf("%s: nil context: %w", op, ErrInvalidArgument)
	}
	return nil
}

// NilReceiver is the error of a method called on a nil handle: it
// matches ErrInvalidArgument and names the type (with its package, e.g.
// "mqlite.Store").
func NilReceiver(typ string) error {
	return fmt.Errorf("mqlite: method called on a nil *%s: %w", typ, ErrInvalidArgument)
}
