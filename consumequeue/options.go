package consumequeue

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/mqlite/mqlite/vfs"
)

// Options configure a Queue (Open) or a Store (OpenStore). The zero value of
// every field but Dir means its default. Options are copied on open.
type Options struct {
	// FS is the file system; nil means vfs.OS.
	FS vfs.FS
	// Dir is the queue directory (Open) or the root holding
	// {topic}/{queueId} directories (OpenStore). Required.
	Dir string
	// EntriesPerFile is the number of 20-byte entries per data file. It
	// is frozen per queue: a directory written with another value is
	// refused with ErrIncompatible. 0 means the value recorded in an
	// existing queue's meta file, and DefaultEntriesPerFile for a new
	// queue.
	EntriesPerFile int
	// adopt is set by withDefaults when EntriesPerFile was 0.
	adopt bool
	// Logger receives recovery warnings; nil discards.
	Logger *slog.Logger
	// ReadOnly opens queues for reading only, beside the process that
	// writes them (or a stopped one): files are opened O_RDONLY and mapped
	// read-only, and nothing is created, repaired or removed. Each queue's
	// meta file then gives its EntriesPerFile. See "Read-only open" in the
	// package documentation.
	ReadOnly bool
}

// String prints the options (after defaults, if they were applied).
func (o Options) String() string {
	fs := "vfs.OS"
	if o.FS != nil && o.FS != vfs.OS {
		fs = fmt.Sprintf("%T", o.FS)
	}
	return fmt.Sprintf("consumequeue.Options{FS: %s, Dir: %q, EntriesPerFile: %d, ReadOnly: %t}", fs, o.Dir, o.EntriesPerFile, o.ReadOnly)
}

// withDefaults returns a copy with defaults applied, or every problem found.
func (o Options) withDefaults() (Options, error) {
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("mqlite/consumequeue: options: "+format+": %w", append(args, ErrInvalidArgument)...))
	}
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.Dir == "" {
		bad("Dir is empty")
	}
	switch {
	case o.EntriesPerFile == 0:
		o.EntriesPerFile, o.adopt = DefaultEntriesPerFile, true
	case o.EntriesPerFile < 0 || o.EntriesPerFile > MaxEntriesPerFile:
		bad("EntriesPerFile %d outside [1, %d]", o.EntriesPerFile, MaxEntriesPerFile)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, errors.Join(problems...)
}
