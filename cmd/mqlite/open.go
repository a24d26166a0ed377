package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/mqlite/mqlite"
)

// options returns the Options to open the store in e.dir with: the sizes
// it was created with, read from its files, because a mismatch would make
// Open reject or, worse, reshape them. It fails when dir holds no store:
// the tool never creates one.
func (e *env) options() (*mqlite.Options, error) {
	logDir := filepath.Join(e.dir, "commitlog")
	if fi, err := os.Stat(logDir); err != nil || !fi.IsDir() {
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil, errors.New("not an mqlite store (no commitlog directory)")
		}
		return nil, err
	}
	seg := e.segmentSize
	if seg == 0 {
		var err error
		if seg, err = segmentSize(logDir); err != nil {
			return nil, err
		}
	}
	o := &mqlite.Options{
		SegmentSize: seg,
		// Accept every record that fits in a segment: with a smaller limit
		// than the store was written with, recovery would take a large
		// record for a torn tail.
		MaxMessageSize: int(min(seg, 1<<30)),
		NoWarm:         true, // the tool writes nothing: no need to pre-touch a new segment
		// ConsumeQueueEntries stays 0: each queue keeps the entries per
		// file its meta file records.
	}
	return o, nil
}

// segmentSize infers the CommitLog segment size from the segment files:
// the distance between the first two names, else the size of the only one.
func segmentSize(logDir string) (int64, error) {
	names, err := os.ReadDir(logDir)
	if err != nil {
		return 0, err
	}
	var starts []int64
	var first string
	for _, n := range names {
		v, err := strconv.ParseInt(n.Name(), 10, 64)
		if len(n.Name()) != 20 || err != nil || n.IsDir() {
			continue
		}
		if first == "" {
			first = n.Name()
		}
		if starts = append(starts, v); len(starts) == 2 {
			return starts[1] - starts[0], nil
		}
	}
	if first == "" {
		return 0, nil // empty CommitLog: the default
	}
	fi, err := os.Stat(filepath.Join(logDir, first))
	if err != nil {
		return 0, err
	}
	if fi.Size() == 0 {
		return 0, fmt.Errorf("cannot infer the segment size from the empty segment %s: pass -segment-size", fi.Name())
	}
	return fi.Size(), nil
}

// open opens the store: read-only with -readonly, else writable (which
// recovers a crashed store as its owner would), falling back to read-only
// when another process holds it. On failure it prints why and returns the
// exit status (see openFailed).
func (e *env) open() (*mqlite.Store, int) {
	s, err := e.openStore()
	if err != nil {
		return nil, e.openFailed(err)
	}
	return s, exitOK
}

// openStore is open without the reporting.
func (e *env) openStore() (*mqlite.Store, error) {
	o, err := e.options()
	if err != nil {
		return nil, err
	}
	if !e.readOnly {
		s, err := mqlite.Open(e.dir, o)
		if !errors.Is(err, mqlite.ErrLocked) {
			return s, err
		}
		fmt.Fprintf(e.stderr, "mqlite %s: %s is in use by another process; reading it read-only: a view as of now, "+
			"without the messages that process has not indexed yet\n", e.cmd, e.dir)
	}
	o.ReadOnly = true
	return mqlite.Open(e.dir, o)
}

// openFailed prints why Open (or RebuildIndexes) failed and returns the
// exit status: 1 when recovery found damage, else 2 (locked, bad options,
// I/O).
func (e *env) openFailed(err error) int {
	switch {
	case errors.Is(err, mqlite.ErrLocked):
		fmt.Fprintf(e.stderr, "mqlite %s: the store in %s is in use by another process (or another Store in this one), "+
			"which holds its directory lock; %s writes the store: stop that process and retry\n", e.cmd, e.dir, e.cmd)
		return exitUsage
	case errors.Is(err, mqlite.ErrReadOnly):
		fmt.Fprintf(e.stderr, "mqlite %s: %s writes the store, so it cannot run with -readonly\n", e.cmd, e.cmd)
		return exitUsage
	case errors.Is(err, mqlite.ErrCorrupt):
		fmt.Fprintf(e.stderr, "mqlite %s: open %s: recovery found damage; nothing was changed (run mqlite verify): %v\n", e.cmd, e.dir, err)
		return exitProblem
	}
	return e.fail(exitUsage, "open "+e.dir, err)
}

// withStore opens the store, runs fn and closes the store; a Close error
// turns success into exit status 2.
func (e *env) withStore(fn func(s *mqlite.Store) int) int {
	s, code := e.open()
	if s == nil {
		return code
	}
	code = fn(s)
	if err := s.Close(); err != nil {
		return max(code, e.fail(exitUsage, "close "+e.dir, err))
	}
	return code
}
