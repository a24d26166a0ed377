package consumer

import "github.com/mqlite/mqlite/internal/errs"

// The sentinel errors returned (wrapped) by this package. They are the same
// values as mqlite's shared sentinels, so errors.Is matches whichever name a
// caller uses.
var (
	// ErrClosed: the Manager or the consumer was closed (or shut down).
	ErrClosed = errs.ErrClosed
	// ErrCorrupt: a config file failed its magic, version, length or
	// CRC32-C check. The error is a *CorruptError naming the file.
	ErrCorrupt = errs.ErrCorrupt
	// ErrNotFound: the queue is not assigned to this consumer.
	ErrNotFound = errs.ErrNotFound
	// ErrInvalidArgument: a bad group name, option, topic, offset or count.
	ErrInvalidArgument = errs.ErrInvalidArgument
	// ErrTopicNotFound: Assign, or Pause or Resume with queues, named a
	// topic the store does not know (Subscribe accepts one: its queues are
	// given out once it exists).
	ErrTopicNotFound = errs.ErrTopicNotFound
	// ErrGroupNotFound: Lag, Offsets or Group named a group never seen.
	ErrGroupNotFound = errs.ErrGroupNotFound
	// ErrGroupActive: ResetOffsets or SetOffset of a group that has live
	// members, or members still stopping.
	ErrGroupActive = errs.ErrGroupActive
	// ErrReadOnly: a consumer or an offset write on a Manager opened with
	// ManagerOptions.ReadOnly.
	ErrReadOnly = errs.ErrReadOnly
	// ErrIO: writing or reading a config file (offsets, groups) failed;
	// the error it wraps tells how.
	ErrIO = errs.ErrIO
	// ErrDiskFull: writing a config file failed for lack of space.
	ErrDiskFull = errs.ErrDiskFull
)

// CorruptError locates damaged data (file and byte offset). It matches
// ErrCorrupt.
type CorruptError = errs.CorruptError
