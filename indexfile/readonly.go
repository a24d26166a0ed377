package indexfile

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// headerTries bounds how often a read-only open re-reads the header of the
// newest file when its checksum fails: the writer rewrites it after every
// entry, so a read can catch it half-written.
const headerTries = 100

// openReadOnly is Open for Options.ReadOnly: see "Read-only open" in the
// package documentation.
func openReadOnly(o Options) (*Index, error) {
	x := &Index{opts: o, log: o.Logger}
	var files []*file
	x.files.Store(&files)
	names, err := o.FS.ReadDir(o.Dir)
	if errors.Is(err, vfs.ErrNotExist) {
		return x, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mqlite/indexfile: list %s: %w", o.Dir, errs.Disk(err))
	}
	var paths []string
	var physs []int64
	for _, name := range names {
		if phys, ok := parseName(name); ok {
			path := filepath.Join(o.Dir, name)
			if _, isDir, err := o.FS.Stat(path); err == nil && !isDir {
				paths, physs = append(paths, path), append(physs, phys)
			}
		}
	}
	for i, path := range paths {
		f, err := openFileReadOnly(o.FS, path, physs[i], i == len(paths)-1, x.log)
		if err == nil && len(files) > 0 && f.beginPhys < files[len(files)-1].endPhys.Load() {
			f.release()
			err = &CorruptError{Path: path, Reason: "indexfile: file begins before the previous file ends"}
		}
		if errors.Is(err, vfs.ErrNotExist) && len(files) == 0 {
			continue // removed by the writer's retention since the listing
		}
		if errors.Is(err, ErrCorrupt) || errors.Is(err, vfs.ErrNotExist) {
			x.log.Warn("indexfile: read-only: not using a damaged (or changing) index file nor the newer ones", "path", path, "err", err)
			break
		}
		if err != nil {
			for _, f := range files {
				f.release()
			}
			return nil, err
		}
		files = append(files, f)
	}
	x.files.Store(&files)
	return x, nil
}

// openFileReadOnly maps an index file read-only, taking its header as it
// is (a dirty file is not rolled back). The newest file (live) may be
// growing under another process's Put: lookups in it are bounded by its
// capacity instead of the count in its header, and by the CRC of each
// entry, and its time range is open-ended.
func openFileReadOnly(fsys vfs.FS, path string, name int64, live bool, log *slog.Logger) (*file, error) {
	fh, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("mqlite/indexfile: open %s: %w", path, errs.Disk(err))
	}
	defer fh.Close()
	size, err := fh.Size()
	if err != nil {
		return nil, fmt.Errorf("mqlite/indexfile: open %s: %w", path, errs.Disk(err))
	}
	if size < HeaderSize {
		return nil, errs.Corrupt(path, 0, "indexfile: file of %d bytes is shorter than its %d-byte header", size, HeaderSize)
	}
	var hb [HeaderSize]byte
	var h header
	var reason string
	for try := 0; try < headerTries; try++ {
		if _, err := fh.ReadAt(hb[:], 0); err != nil {
			return nil, fmt.Errorf("mqlite/indexfile: read header of %s: %w", path, errs.Disk(err))
		}
		if h, reason = decodeHeader(hb[:]); reason == "" {
			reason = h.check(size, name)
		}
		if reason == "" || reason == reasonVersion || !live {
			break
		}
		runtime.Gosched()
	}
	if reason == reasonVersion {
		return nil, fmt.Errorf("mqlite/indexfile: %s has format version %d, this build reads %d: %w", path, h.version, FormatVersion, ErrVersion)
	}
	if reason != "" {
		return nil, errs.Corrupt(path, 0, "indexfile: %s", reason)
	}
	m, err := fh.Map(int(size))
	if err != nil {
		return nil, fmt.Errorf("mqlite/indexfile: map %s: %w", path, errs.Disk(err))
	}
	if !aligned(m.Bytes()) {
		m.Unmap()
		return nil, fmt.Errorf("mqlite/indexfile: map %s: mapping is not 8-byte aligned", path)
	}
	f := &file{path: path, log: log, m: m, b: m.Bytes(), slots: h.slots, entries: h.entries,
		beginPhys: h.beginPhys, beginTime: h.beginTime}
	f.count.Store(h.count)
	f.endPhys.Store(h.endPhys)
	f.endTime.Store(h.endTime)
	if live {
		f.count.Store(h.entries + 1)
		f.endTime.Store(maxStoreTime)
	}
	f.refs.Store(1)
	return f, nil
}

func (x *Index) refuse(op string) error {
	return fmt.Errorf("mqlite/indexfile: %s %s: %w", op, x.opts.Dir, ErrReadOnly)
}
