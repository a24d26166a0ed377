package topic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// File is the registry's file name in the config directory.
const File = "topics.json"

const (
	fileMagic = 0x4D515450 // "MQTP"
	// fileVersion is written while no topic has a retention of its own;
	// fileVersion2 adds a topic's retention_ms and retention_bytes, which
	// a version 1 reader would drop silently.
	fileVersion  = 1
	fileVersion2 = 2
)

// Info describes a registered topic.
type Info struct {
	Name    string
	Config  Config
	System  bool      // created by the store (retry, DLQ, schedule, ...)
	Created time.Time // when it was first created
}

type record struct {
	Queues         int   `json:"queues"`
	System         bool  `json:"system,omitempty"`
	Created        int64 `json:"created_ms"`
	RetentionMs    int64 `json:"retention_ms,omitempty"`
	RetentionBytes int64 `json:"retention_bytes,omitempty"`
}

func (rec record) config() Config {
	return Config{Queues: rec.Queues, RetentionAge: time.Duration(rec.RetentionMs) * time.Millisecond,
		RetentionBytes: rec.RetentionBytes}
}

func (rec *record) setConfig(c Config) {
	rec.Queues, rec.RetentionMs, rec.RetentionBytes = c.Queues, c.RetentionAge.Milliseconds(), c.RetentionBytes
}

// version is the file version m is written in: the oldest that holds it.
func version(m map[string]record) uint32 {
	for _, rec := range m {
		if rec.RetentionMs != 0 || rec.RetentionBytes != 0 {
			return fileVersion2
		}
	}
	return fileVersion
}

// Registry is the set of topics of one store. Lookups are lock-free (a
// copy-on-write map); changes are serialised and persisted before they
// become visible.
type Registry struct {
	fs  vfs.FS
	dir string
	now func() time.Time

	mu     sync.Mutex // serialises changes and the file
	topics atomic.Pointer[map[string]record]
	found  bool // Open read the file
}

// Open loads the registry from dir/File (an absent file is an empty
// registry). now stamps creation times.
func Open(fs vfs.FS, dir string, now func() time.Time) (*Registry, error) {
	r := &Registry{fs: fs, dir: dir, now: now}
	m, found, err := readFile(fs, dir)
	if err != nil {
		return nil, err
	}
	r.found = found
	for name, rec := range m {
		if err := rec.check(name); err != nil {
			return nil, errs.Corrupt(filepath.Join(dir, File), cfgfile.HeaderSize, "topic %q: %v", name, err)
		}
	}
	r.topics.Store(&m)
	return r, nil
}

// check validates a record read from the file against the rules every
// change obeys: a system topic has a system name, a user topic a user one
// (ValidateName), and the queue count is in range.
func (rec record) check(name string) error {
	if rec.System {
		if err := ValidateSystem(name); err != nil {
			return fmt.Errorf("system topic: %w", err)
		}
	} else if err := ValidateName(name); err != nil {
		return fmt.Errorf("user topic: %w", err)
	}
	if rec.System && (rec.RetentionMs != 0 || rec.RetentionBytes != 0) {
		return fmt.Errorf("system topic with a retention")
	}
	return rec.config().validate()
}

// readFile loads the registry's file in either version; found is false
// when there is none. A version 1 file with retentions is ErrCorrupt (no
// build writes one).
func readFile(fs vfs.FS, dir string) (m map[string]record, found bool, err error) {
	path := filepath.Join(dir, File)
	b, err := vfs.ReadFile(fs, path)
	if errors.Is(err, vfs.ErrNotExist) {
		return map[string]record{}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("mqlite: read %s: %w (%w)", path, errs.ErrIO, err)
	}
	ver := uint32(fileVersion2)
	if len(b) >= 8 && binary.LittleEndian.Uint32(b[4:]) == fileVersion {
		ver = fileVersion
	}
	m = map[string]record{}
	if err := cfgfile.Decode(path, b, fileMagic, ver, &m); err != nil {
		return nil, false, err
	}
	if ver == fileVersion && version(m) != fileVersion {
		return nil, false, errs.Corrupt(path, 4, "version %d file has topic retentions (version %d only)", fileVersion, fileVersion2)
	}
	return m, true, nil
}

// Found reports whether Open read the registry's file: false for a new
// store, and for one whose file was lost.
func (r *Registry) Found() bool { return r.found }

// Restore registers the topics of queues (name -> queue count) that the
// registry lacks, each with the current time as its creation time, a
// system topic if its name is a system name: for a store whose file was
// lost, from the queues its ConsumeQueue holds. A name that is neither a
// valid user nor a valid system topic name is left out. It returns the
// names it registered, sorted, and persists them in one write, unless
// persist is false (a read-only store: they live in memory only).
func (r *Registry) Restore(queues map[string]int, persist bool) ([]string, error) {
	var added []string
	err := r.apply(persist, func(m map[string]record) error {
		for _, name := range slices.Sorted(maps.Keys(queues)) {
			if _, ok := m[name]; ok {
				continue
			}
			rec := record{Queues: queues[name], System: IsSystem(name), Created: r.now().UnixMilli()}
			if rec.check(name) != nil {
				continue
			}
			m[strings.Clone(name)] = rec
			added = append(added, name)
		}
		if len(added) == 0 {
			return errUnchanged
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// Get returns the configuration of a topic, or ErrTopicNotFound.
func (r *Registry) Get(name string) (Config, error) {
	rec, ok := (*r.topics.Load())[name]
	if !ok {
		// The sentinel says what is wrong, the name says where: callers
		// add their operation in front and need not repeat the name.
		return Config{}, fmt.Errorf("%w: %q", errs.ErrTopicNotFound, name)
	}
	return rec.config(), nil
}

// Retention returns a topic's own retention (zero values: none), in one
// map lookup.
func (r *Registry) Retention(name string) (age time.Duration, bytes int64) {
	rec := (*r.topics.Load())[name]
	return time.Duration(rec.RetentionMs) * time.Millisecond, rec.RetentionBytes
}

// Lookup returns the queue count of a topic (0 if it does not exist) and
// whether the store created it as a system topic, in one map lookup.
func (r *Registry) Lookup(name string) (queues int, system bool) {
	rec := (*r.topics.Load())[name]
	return rec.Queues, rec.System
}

// Queues returns the queue count of a topic (0 if it does not exist).
func (r *Registry) Queues(name string) int {
	return (*r.topics.Load())[name].Queues
}

// Topics lists every topic, sorted by name.
func (r *Registry) Topics() []Info {
	m := *r.topics.Load()
	out := make([]Info, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		rec := m[name]
		out = append(out, Info{Name: name, Config: rec.config(), System: rec.System,
			Created: time.UnixMilli(rec.Created)})
	}
	return out
}

// Create registers a user topic: ErrInvalidTopic for an illegal or system
// name, ErrTopicExists if it is there.
func (r *Registry) Create(name string, c Config) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	return r.change(func(m map[string]record) error {
		if _, ok := m[name]; ok {
			return fmt.Errorf("mqlite: create topic %q: %w", name, errs.ErrTopicExists)
		}
		rec := record{Created: r.now().UnixMilli()}
		rec.setConfig(c)
		m[strings.Clone(name)] = rec
		return nil
	})
}

// Ensure returns the queue count of a topic, creating it with c first if
// it does not exist. system marks a topic the store creates for itself
// (its name may be a system name); otherwise the user rules apply.
func (r *Registry) Ensure(name string, c Config, system bool) (int, error) {
	if n := r.Queues(name); n > 0 {
		return n, nil
	}
	if system {
		if err := ValidateSystem(name); err != nil {
			return 0, err
		}
	} else if err := ValidateName(name); err != nil {
		return 0, err
	}
	if err := c.validate(); err != nil {
		return 0, err
	}
	var n int
	err := r.change(func(m map[string]record) error {
		if rec, ok := m[name]; ok {
			n = rec.Queues
			return errUnchanged
		}
		rec := record{System: system, Created: r.now().UnixMilli()}
		if !system {
			rec.setConfig(c)
		} else {
			rec.Queues = c.Queues
		}
		m[strings.Clone(name)] = rec
		n = c.Queues
		return nil
	})
	return n, err
}

// EnsureAtLeast creates a system topic with queues queues, or grows an
// existing one to that many; it returns the queue count.
func (r *Registry) EnsureAtLeast(name string, queues int) (int, error) {
	if err := ValidateSystem(name); err != nil {
		return 0, err
	}
	if err := (Config{Queues: queues}).validate(); err != nil {
		return 0, err
	}
	n := queues
	err := r.change(func(m map[string]record) error {
		rec, ok := m[name]
		if ok && rec.Queues >= queues {
			n = rec.Queues
			return errUnchanged
		}
		if !ok {
			rec = record{System: true, Created: r.now().UnixMilli()}
		}
		rec.Queues = queues
		m[strings.Clone(name)] = rec
		return nil
	})
	return n, err
}

// ValidateSystem checks a name the store uses for itself.
func ValidateSystem(name string) error {
	if err := ValidateSysName(name); err != nil {
		return err
	}
	if !IsSystem(name) {
		return fmt.Errorf("%w: %q is not a system topic", errs.ErrInvalidArgument, name)
	}
	return nil
}

// Update changes a topic's configuration. The queue count may grow; a
// smaller count is refused (ErrInvalidArgument), since messages in the
// dropped queues would be stranded.
func (r *Registry) Update(name string, c Config) error {
	if err := c.validate(); err != nil {
		return err
	}
	return r.change(func(m map[string]record) error {
		rec, err := userRecord(m, "update", name)
		if err != nil {
			return err
		}
		if c.Queues < rec.Queues {
			return fmt.Errorf("mqlite: update topic %q: queues cannot shrink from %d to %d: %w",
				name, rec.Queues, c.Queues, errs.ErrInvalidArgument)
		}
		if c == rec.config() {
			return errUnchanged
		}
		rec.setConfig(c)
		m[strings.Clone(name)] = rec
		return nil
	})
}

// userRecord returns the record of user topic name for op: ErrTopicNotFound
// if it is not there, ErrInvalidArgument for a system topic.
func userRecord(m map[string]record, op, name string) (record, error) {
	rec, ok := m[name]
	if !ok {
		return record{}, fmt.Errorf("mqlite: %s topic %q: %w", op, name, errs.ErrTopicNotFound)
	}
	if rec.System {
		return record{}, fmt.Errorf("mqlite: %s topic %q: it is a system topic: %w", op, name, errs.ErrInvalidArgument)
	}
	return rec, nil
}

// Delete removes a user topic from the registry: ErrTopicNotFound if it
// is not there.
func (r *Registry) Delete(name string) error {
	return r.change(func(m map[string]record) error {
		if _, err := userRecord(m, "delete", name); err != nil {
			return err
		}
		delete(m, name)
		return nil
	})
}

var errUnchanged = fmt.Errorf("unchanged")

// change applies fn to a copy of the map, persists it, then publishes it.
// fn returning errUnchanged means success without a write.
func (r *Registry) change(fn func(map[string]record) error) error {
	return r.apply(true, fn)
}

// apply is change, persisting the new map only if persist is set.
func (r *Registry) apply(persist bool, fn func(map[string]record) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := maps.Clone(*r.topics.Load())
	if err := fn(m); err != nil {
		if err == errUnchanged {
			return nil
		}
		return err
	}
	if persist {
		if err := cfgfile.Write(r.fs, r.dir, File, fileMagic, version(m), m); err != nil {
			return err
		}
	}
	r.topics.Store(&m)
	return nil
}
