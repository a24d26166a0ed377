//go:build linux

package mqlite

// S21-S23 against the real OS: a process whose file size limit
// (RLIMIT_FSIZE) stops segment allocation, and a 4 MiB tmpfs in a private
// mount namespace that really fills up.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

func fullOptions() *Options {
	return &Options{SegmentSize: 256 << 10, ConsumeQueueEntries: 1024, IndexSlots: 64, IndexEntries: 1024, NoWarm: true,
		DiskMaxUsedRatio: 1, CleanRatio: 1, ForceCleanRatio: 1, DeleteHour: farHour(), Retention: time.Nanosecond}
}

func fullBody(i int) []byte { return []byte(fmt.Sprintf("%06d%s", i, strings.Repeat("f", 1000))) }

// fullWriter is the sending side of the disk-full children.
type fullWriter struct {
	t    *testing.T
	s    *Store
	next int
	acks []string
}

func (w *fullWriter) put() error {
	r, err := w.s.Put(context.Background(), &Message{Topic: "full", Keys: []string{"f" + strconv.Itoa(w.next)}, Body: fullBody(w.next)}, w.next%2)
	if err == nil {
		emit("ack %s", r.MsgID())
		w.acks = append(w.acks, r.MsgID())
		w.next++
	}
	return err
}

// fillUp sends until a send fails, which must be with ErrDiskFull.
func (w *fullWriter) fillUp() {
	for range 20_000 {
		if err := w.put(); err != nil {
			if !errors.Is(err, ErrDiskFull) {
				childFail(w.t, "a send on a full disk: %v", err)
			}
			return
		}
	}
	childFail(w.t, "the disk never filled")
}

// resume sends until one succeeds (the first append that needs a segment
// asks the allocator again, so one normally does) and returns how long
// that took.
func (w *fullWriter) resume() time.Duration {
	start := time.Now()
	for range 3 {
		err := w.put()
		if err == nil {
			return time.Since(start)
		}
		if !errors.Is(err, ErrDiskFull) {
			childFail(w.t, "a send once there is room: %v", err)
		}
	}
	childFail(w.t, "sends did not resume")
	return 0
}

// readsGoOn checks, on a full disk, that reads and a consumer with offset
// commits work and that the store is not fenced.
func (w *fullWriter) readsGoOn() {
	if _, err := w.s.MessageByID(w.acks[0]); err != nil {
		childFail(w.t, "read on a full disk: %v", err)
	}
	if err := w.s.log.Fenced(); err != nil {
		childFail(w.t, "a full disk fenced the store: %v", err)
	}
	pc, err := w.s.NewPullConsumer("reader", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	if err != nil {
		childFail(w.t, "consumer on a full disk: %v", err)
	}
	if err := pc.Assign("full", nil, 0); err != nil {
		childFail(w.t, "assign: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a failure bound
	defer cancel()
	for got := 0; got < 10; {
		ms, err := pc.Poll(ctx, 10-got)
		if err != nil {
			childFail(w.t, "poll on a full disk: %v", err)
		}
		got += len(ms)
	}
	if err := pc.CommitOffset("full", 0, 10); err != nil {
		childFail(w.t, "commit on a full disk: %v", err)
	}
	if err := pc.Close(); err != nil {
		childFail(w.t, "consumer close on a full disk: %v", err)
	}
}

// TestChildFileSizeLimit: S21 with RLIMIT_FSIZE. Sends until the next
// segment cannot be allocated (EFBIG, SIGXFSZ ignored), checks that reads
// and consumers go on, lifts the limit and sends again without reopening.
func TestChildFileSizeLimit(t *testing.T) {
	dir := childDir(t, "TestChildFileSizeLimit")
	signal.Ignore(syscall.SIGXFSZ)
	s, err := Open(dir, fullOptions())
	if err != nil {
		childFail(t, "open: %v", err)
	}
	w := &fullWriter{t: t, s: s}
	for range 50 {
		if err := w.put(); err != nil {
			childFail(t, "put: %v", err)
		}
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		childFail(t, "getrlimit: %v", err)
	}
	old := lim
	lim.Cur = 128 << 10 // below the segment size, above every other file
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		childFail(t, "setrlimit: %v", err)
	}
	w.fillUp()
	emit("full %d", s.log.WrotePosition())
	w.readsGoOn()
	if err := w.put(); !errors.Is(err, ErrDiskFull) {
		childFail(t, "a second send on the full disk: %v", err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		childFail(t, "setrlimit: %v", err)
	}
	emit("resumed %d", w.resume())
	for range 300 { // more than a segment: allocation works again
		if err := w.put(); err != nil {
			childFail(t, "put after the limit was lifted: %v", err)
		}
	}
	if err := s.WaitVisible(context.Background()); err != nil {
		childFail(t, "wait: %v", err)
	}
	if err := s.Close(); err != nil {
		childFail(t, "close: %v", err)
	}
	emit("closed")
}

// S21 (RLIMIT_FSIZE variant, always runs): a send that needs a segment the
// process may not allocate fails with ErrDiskFull (no SIGBUS: the process
// lives on), reads, consumers and offset commits go on, sends resume
// without reopening once the limit is lifted, and every acknowledged
// message is there after a reopen.
func TestDiskFullFileSizeLimit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	c, err := startChild(t, "TestChildFileSizeLimit", dir, nil)
	require.NoError(t, err)
	var acks []string
	var full int64
	var resumed time.Duration
	for line := range c.lines {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "ack":
			acks = append(acks, f[1])
		case len(f) == 2 && f[0] == "full":
			full, _ = strconv.ParseInt(f[1], 10, 64)
		case len(f) == 2 && f[0] == "resumed":
			d, _ := strconv.ParseInt(f[1], 10, 64)
			resumed = time.Duration(d)
		case len(f) > 0 && f[0] == "fail":
			t.Fatalf("child: %s\n%s", line, c.stderr.String())
		}
	}
	c.wait()
	require.Positive(t, full)
	s, err := Open(dir, fullOptions())
	require.NoError(t, err)
	defer s.Close()
	for _, id := range acks {
		_, err := s.MessageByID(id)
		require.NoError(t, err, "acknowledged %s", id)
	}
	t.Logf("RLIMIT_FSIZE: first ErrDiskFull at %d bytes of CommitLog, SIGBUS 0, %d acked, 0 lost, resumed in %s", full, len(acks), resumed)
}

// statfsFree is the space left on the volume of dir for a writer.
func statfsFree(dir string) (free, total uint64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize)
}

// ballast writes a file of n bytes of data (n < 0: until the volume is
// full) and returns its size.
func ballast(path string, n int64) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	var size int64
	for n < 0 || size < n {
		if _, err := f.WriteAt(chunk, size); err != nil {
			if n < 0 && errors.Is(err, syscall.ENOSPC) {
				return size, nil
			}
			return size, err
		}
		size += int64(len(chunk))
	}
	return size, nil
}

// TestChildTmpfs runs S21, S22 and S23 on a 4 MiB tmpfs it mounts in its
// own mount namespace (it prints "skip ..." when it may not).
func TestChildTmpfs(t *testing.T) {
	mnt := childDir(t, "TestChildTmpfs")
	// Private first, so that the mount stays inside this namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		emit("skip cannot make the mounts private: %v", err)
		return
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=4m"); err != nil {
		emit("skip cannot mount a tmpfs: %v", err)
		return
	}
	dir := filepath.Join(mnt, "store")
	ctx := context.Background()

	// S23: above DiskMaxUsedRatio (statfs) sends are refused while the
	// volume still has room.
	if _, err := ballast(filepath.Join(mnt, "ballast"), 3<<20); err != nil {
		childFail(t, "ballast: %v", err)
	}
	o := fullOptions()
	o.DiskMaxUsedRatio = 0.8
	s, err := Open(dir, o)
	if err != nil {
		childFail(t, "open: %v", err)
	}
	if _, err := s.Put(ctx, &Message{Topic: "full", Body: []byte("over the watermark")}, 0); !errors.Is(err, ErrDiskFull) {
		childFail(t, "a send above the watermark: %v", err)
	}
	free, total := statfsFree(mnt)
	emit("watermark %d %d", free, total)
	if err := s.Close(); err != nil {
		childFail(t, "close: %v", err)
	}
	if err := os.Remove(filepath.Join(mnt, "ballast")); err != nil {
		childFail(t, "%v", err)
	}

	// S21: a real ENOSPC.
	s, err = Open(dir, fullOptions())
	if err != nil {
		childFail(t, "open: %v", err)
	}
	w := &fullWriter{t: t, s: s}
	w.fillUp()
	free, _ = statfsFree(mnt)
	emit("full %d %d", s.log.WrotePosition(), free)
	w.readsGoOn()

	// S22: with the last bytes taken too, a metadata write fails, leaves
	// the previous file intact, and succeeds later.
	rest, err := ballast(filepath.Join(mnt, "rest"), -1)
	if err != nil {
		childFail(t, "filling the rest: %v", err)
	}
	topicsBefore := s.Topics()
	if err := s.CreateTopic("later", TopicConfig{Queues: 1}); err == nil || !errors.Is(err, syscall.ENOSPC) {
		childFail(t, "a topic created on a full disk: %v", err)
	}
	if ro, err := Open(dir, &Options{ReadOnly: true}); err != nil || ro.Close() != nil {
		childFail(t, "a read-only open on a full disk: %v", err)
	}
	reg, err := topic.Open(vfs.OS, filepath.Join(dir, configDir), time.Now)
	if err != nil || len(reg.Topics()) != len(topicsBefore) {
		childFail(t, "the topics file after a failed write: %v", err)
	}
	emit("metadata %d", rest)

	// Retention frees space: sends resume without reopening.
	rep, err := s.CleanExpired()
	if err != nil || rep.Segments == 0 {
		childFail(t, "retention on a full disk: %+v, %v", rep, err)
	}
	emit("resumed %d %d", w.resume(), rep.Segments)
	if err := s.CreateTopic("later", TopicConfig{Queues: 1}); err != nil {
		childFail(t, "the topic once there is room: %v", err)
	}
	if err := os.Remove(filepath.Join(mnt, "rest")); err != nil {
		childFail(t, "%v", err)
	}
	for range 300 {
		if err := w.put(); err != nil {
			childFail(t, "put after retention: %v", err)
		}
	}
	if err := s.WaitVisible(ctx); err != nil {
		childFail(t, "wait: %v", err)
	}
	if err := s.Close(); err != nil {
		childFail(t, "close: %v", err)
	}

	// Reopen: every acknowledged message at or past the new minimum.
	s, err = Open(dir, fullOptions())
	if err != nil {
		childFail(t, "reopen: %v", err)
	}
	defer s.Close()
	if r := s.Recovery(); !r.CleanShutdown || !r.CheckpointFound {
		childFail(t, "reopen: %+v", r)
	}
	removed := 0
	for _, id := range w.acks {
		_, err := s.MessageByID(id)
		if errors.Is(err, ErrNotFound) && strings.Contains(err.Error(), "was removed") {
			removed++
			continue
		}
		if err != nil {
			childFail(t, "acknowledged %s: %v", id, err)
		}
	}
	emit("verified %d %d", len(w.acks), removed)
}

// S21 (tmpfs), S22 and S23 on a real, really full file system: a 4 MiB
// tmpfs mounted by a child in its own mount namespace (skipped with a
// message when the kernel refuses).
func TestDiskFullTmpfs(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	c, err := startChild(t, "TestChildTmpfs", mnt, attr)
	if err != nil {
		t.Skipf("cannot start a process in a new mount namespace: %v (the RLIMIT_FSIZE variant covers S21)", err)
	}
	f := c.expect("watermark")
	free, _ := strconv.ParseUint(f[0], 10, 64)
	total, _ := strconv.ParseUint(f[1], 10, 64)
	require.Positive(t, free, "refused before the volume was full")
	f = c.expect("full")
	t.Logf("S23: sends refused at %.0f%% of the tmpfs used, %d bytes still free", 100-100*float64(free)/float64(total), free)
	t.Logf("S21: first ErrDiskFull at %s bytes of CommitLog with %s bytes free (less than a segment), SIGBUS 0", f[0], f[1])
	f = c.expect("metadata")
	t.Logf("S22: with the last %s bytes taken, a topic write failed with ENOSPC and left the file intact", f[0])
	f = c.expect("resumed")
	d, _ := strconv.ParseInt(f[0], 10, 64)
	t.Logf("S21: retention removed %s segments, sends resumed in %s without reopening", f[1], time.Duration(d))
	f = c.expect("verified")
	t.Logf("S21: %s acknowledged, all present after reopen but the %s that retention removed", f[0], f[1])
	c.wait()
}
