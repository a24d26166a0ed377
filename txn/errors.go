package txn

import (
	"errors"

	"github.com/mqlite/mqlite/internal/errs"
)

// Errors. ErrClosed, ErrCorrupt, ErrInvalidArgument and ErrFlushTimeout
// are the store-wide sentinels (the same values the root package exports),
// so errors.Is matches whichever name a caller uses.
var (
	// ErrClosed: the producer or the service was closed.
	ErrClosed = errs.ErrClosed
	// ErrCorrupt: the progress file is damaged; the error names the file.
	ErrCorrupt = errs.ErrCorrupt
	// ErrInvalidArgument: a nil or invalid message, a nil local
	// transaction or checker, a bad group name or bad options.
	ErrInvalidArgument = errs.ErrInvalidArgument
	// ErrFlushTimeout: a record is stored but its flush did not complete
	// in time.
	ErrFlushTimeout = errs.ErrFlushTimeout
	// ErrReadOnly: CheckNow (or a producer) on a service of a store opened
	// read-only.
	ErrReadOnly = errs.ErrReadOnly
	// ErrLocalTx: the local transaction panicked or returned a value that
	// is not a TxState. The half message is kept and its outcome left to
	// the check-back, exactly as if it had returned Unknown.
	ErrLocalTx = errors.New("mqlite/txn: local transaction failed, outcome left to check-back")
)
