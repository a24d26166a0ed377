package indexfile

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/mqlite/mqlite/vfs"
)

// Options configure an Index. The zero value of each field means its
// default; Open copies the struct and validates it, reporting every problem
// at once.
type Options struct {
	// FS is the file seam; nil means vfs.OS.
	FS vfs.FS
	// Dir holds the index files (the store passes "<root>/index"). It is
	// created if missing. Required.
	Dir string
	// Slots is the hash slot count of new files; 0 means DefaultSlots.
	// Existing files keep the counts in their headers.
	Slots int
	// Entries is the entry capacity of new files; 0 means DefaultEntries.
	// It must exceed the number of keys any one commitlog offset carries.
	Entries int
	// Logger receives recovery reports; nil discards.
	Logger *slog.Logger
	// ReadOnly opens the index for queries only, beside the process that
	// writes it (or a stopped one): nothing is created, repaired or
	// deleted; see "Read-only open" in the package documentation.
	ReadOnly bool
}

// String prints the options (the FS by type).
func (o Options) String() string {
	return fmt.Sprintf("indexfile.Options{FS: %T, Dir: %q, Slots: %d, Entries: %d, FileSize: %d}",
		o.FS, o.Dir, o.Slots, o.Entries, FileSize(o.Slots, o.Entries))
}

// withDefaults returns a copy with defaults filled in, or an error listing
// every problem.
func (o Options) withDefaults() (Options, error) {
	var problems []string
	if o.Dir == "" {
		problems = append(problems, "Dir is empty")
	}
	if o.Slots < 0 || o.Slots > MaxSlots {
		problems = append(problems, fmt.Sprintf("Slots %d is outside [0, %d]", o.Slots, MaxSlots))
	}
	if o.Entries < 0 || o.Entries > MaxEntries {
		problems = append(problems, fmt.Sprintf("Entries %d is outside [0, %d]", o.Entries, MaxEntries))
	}
	if len(problems) > 0 {
		return o, invalidf("bad options: %s", strings.Join(problems, "; "))
	}
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.Slots == 0 {
		o.Slots = DefaultSlots
	}
	if o.Entries == 0 {
		o.Entries = DefaultEntries
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
