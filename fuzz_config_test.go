package mqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// The fuzz targets of this file (and meta_config_test.go's table tests) load a
// store whose files a real store wrote, but for one file replaced by a body
// behind a valid header. Open must not panic or hang, and either fails with
// ErrCorrupt naming the file, leaving every file as it was, or gives a
// store that loses nothing and works: see checkImageStore.

const imageDir = "/img"

// imageOptions are the options of the image's store and of every reopen.
// The store's log goes to t's log if t fails.
func imageOptions(t testing.TB, clk clock.Clock) *Options {
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("store log:\n%s", logs)
		}
	})
	return &Options{Clock: clk, Flush: FlushSync, SegmentSize: 64 << 10, ConsumeQueueEntries: 64, IndexSlots: 64, IndexEntries: 128,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

// logBuffer is a log sink safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// storeImage is a closed store's files and what it held.
type storeImage struct {
	files map[string][]byte // path -> content
	ids   map[string]string // message ID -> body, every message stored
	now   time.Time         // the store's clock at Close
	q0Max int64             // the end of queue 0 of topic t, where the delayed messages went
	ends  map[string]int64  // "topic/id" -> end, of the schedule and timer queues
}

// newStoreImage runs a store through topics, plain, delayed and timer
// messages (delivered and pending), a consumer group with offsets and a
// transaction, closes it and returns its files.
func newStoreImage(t testing.TB) *storeImage {
	t.Helper()
	clk := clock.NewFake(t0)
	fs := vfs.NewMem()
	s, err := openFS(fs, imageDir, imageOptions(t, clk))
	require.NoError(t, err)
	ctx := context.Background()
	img := &storeImage{ids: map[string]string{}}
	put := func(m *Message, q int) {
		r, err := s.Put(ctx, m, q)
		require.NoError(t, err)
		img.ids[r.MsgID()] = string(m.Body)
	}
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
	for i := range 6 {
		put(&Message{Topic: "t", Keys: []string{fmt.Sprint("k", i)}, Body: fmt.Appendf(nil, "plain-%d", i)}, i%2)
	}
	put(&Message{Topic: "t", DelayLevel: 1, Body: []byte("delay-1s")}, 0)
	put(&Message{Topic: "t", DelayLevel: 17, Body: []byte("delay-1h")}, 0)
	put(&Message{Topic: "t", DeliverAt: t0.Add(90 * time.Second), Body: []byte("timer-90s")}, 0)
	put(&Message{Topic: "t", DeliverAt: t0.Add(time.Hour), Body: []byte("timer-1h")}, 0)
	clk.Advance(2 * time.Minute)
	delivered := readRange(t, s, "t", 0, 3, 5) // delay-1s and timer-90s, in their real queue
	for _, m := range delivered {
		img.ids[m.MsgID] = string(m.Body)
	}
	c, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("t", nil))
	msgs, err := c.Poll(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, c.CommitOffset(msgs[0].Topic, int(msgs[0].QueueID), msgs[0].QueueOffset+1))
	require.NoError(t, c.Close())
	tp, err := s.NewTransactionProducer(func(context.Context, *MessageExt) TxState { return CommitMessage }, TransactionOptions{})
	require.NoError(t, err)
	_, err = tp.SendInTransaction(ctx, &Message{Topic: "t", Body: []byte("tx")}, func(context.Context, *Message) TxState { return CommitMessage })
	require.NoError(t, err)
	require.NoError(t, tp.Close())
	require.NoError(t, s.CheckTransactions(ctx))
	img.q0Max, err = s.MaxOffset("t", 0)
	require.NoError(t, err)
	img.ends = map[string]int64{}
	for _, q := range []struct {
		name string
		id   int
	}{{topic.Schedule, 0}, {topic.Timer, 0}} {
		img.ends[fmt.Sprint(q.name, "/", q.id)] = s.recoveredEnd(q.name, q.id)
	}
	require.NoError(t, s.Close())
	img.now = clk.Now()
	img.files = snapshotFS(t, fs, imageDir)
	return img
}

// queueEnd is the end of a queue of the image's store.
func (img *storeImage) queueEnd(t testing.TB, name string, id int) int64 {
	t.Helper()
	end, ok := img.ends[fmt.Sprint(name, "/", id)]
	require.True(t, ok, "no end recorded for %s/%d", name, id)
	return end
}

// snapshotFS reads every file under dir.
func snapshotFS(t testing.TB, fs vfs.FS, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	var rerr error
	require.NoError(t, walkFS(fs, dir, func(p string, isDir bool) {
		if isDir || rerr != nil {
			return
		}
		out[p], rerr = vfs.ReadFile(fs, p)
	}))
	require.NoError(t, rerr)
	return out
}

// restore writes the image to a new in-memory file system, with replace
// (path -> content) instead of the image's files.
func (img *storeImage) restore(t testing.TB, replace map[string][]byte) *vfs.MemFS {
	t.Helper()
	fs := vfs.NewMem()
	for p, b := range img.files {
		if r, ok := replace[p]; ok {
			b = r
		}
		require.NoError(t, fs.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, vfs.WriteFileAtomic(fs, filepath.Dir(p), filepath.Base(p), b))
	}
	for p, b := range replace {
		if _, ok := img.files[p]; !ok {
			require.NoError(t, fs.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, vfs.WriteFileAtomic(fs, filepath.Dir(p), filepath.Base(p), b))
		}
	}
	return fs
}

// configBody is the body of the image's config file name.
func (img *storeImage) configBody(t testing.TB, name string) []byte {
	b, ok := img.files[filepath.Join(imageDir, configDir, name)]
	require.True(t, ok, "the image has no %s", name)
	return b[cfgfile.HeaderSize:]
}

// checkConfigBody opens the image with config file name replaced by body
// behind a valid header; see checkImageStore.
func checkConfigBody(t *testing.T, img *storeImage, name string, magic, version uint32, body []byte, also ...error) error {
	t.Helper()
	return checkImageStore(t, img, filepath.Join(imageDir, configDir, name), cfgfile.Frame(magic, version, body), also...)
}

// checkImageStore opens the image with file path holding content. It
// returns Open's error after checking that it is an ErrCorrupt naming the
// file (or one of also) and that no file changed. After a successful Open
// every message of the image reads back, new plain, delayed and timer
// messages are delivered, and the store closes and reopens.
func checkImageStore(t *testing.T, img *storeImage, path string, content []byte, also ...error) error {
	t.Helper()
	fs := img.restore(t, map[string][]byte{path: content})
	before := snapshotFS(t, fs, imageDir)
	clk := clock.NewFake(img.now)
	s, err := openFS(fs, imageDir, imageOptions(t, clk))
	if err != nil {
		switch {
		case errors.Is(err, ErrCorrupt):
			require.Contains(t, err.Error(), path)
		case !slices.ContainsFunc(also, func(e error) bool { return errors.Is(err, e) }):
			t.Fatalf("Open: %v, want ErrCorrupt", err)
		}
		require.Equal(t, before, snapshotFS(t, fs, imageDir), "a refused Open changed files")
		return err
	}
	defer s.Close()
	for id, body := range img.ids {
		m, err := s.MessageByID(id)
		require.NoError(t, err, "message %s (%s) lost", id, body)
		require.Equal(t, body, string(m.Body))
	}
	ctx := context.Background()
	from, err := s.MaxOffset("t", 1)
	require.NoError(t, err)
	for _, m := range []*Message{
		{Topic: "t", Body: []byte("new-plain")},
		{Topic: "t", DelayLevel: 1, Body: []byte("new-delay")},
		{Topic: "t", DeliverAt: clk.Now().Add(61 * time.Second), Body: []byte("new-timer")},
	} {
		r, err := s.Put(ctx, m, 1)
		require.NoError(t, err)
		got, err := s.MessageByID(r.MsgID())
		require.NoError(t, err)
		require.Equal(t, m.Body, got.Body)
	}
	clk.Advance(2 * time.Minute)
	var bodies []string
	for _, m := range readRange(t, s, "t", 1, int(from), int(from)+3) {
		bodies = append(bodies, string(m.Body))
	}
	slices.Sort(bodies)
	require.Equal(t, []string{"new-delay", "new-plain", "new-timer"}, bodies, "delivered to queue 1")
	// Delayed and timer messages of the image delivered before are not
	// delivered again (they would come first: delivery is in due order).
	q0, err := s.MaxOffset("t", 0)
	require.NoError(t, err)
	require.Equal(t, img.q0Max, q0, "queue 0 grew: a message was delivered twice")
	require.NoError(t, s.Close())
	s2, err := openFS(fs, imageDir, imageOptions(t, clk))
	require.NoError(t, err, "reopen")
	require.NoError(t, s2.Close())
	return nil
}

// FuzzDelayProgressFile: the delay levels' progress (delayOffset.json).
func FuzzDelayProgressFile(f *testing.F) {
	img := newStoreImage(f)
	f.Add(img.configBody(f, delayFile))
	for _, s := range []string{`{}`, `null`, `{"1":-1}`, `{"1":9223372036854775807}`, `{"0":1}`, `{"65":1}`, `{"x":1}`, `{"1":"1"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkConfigBody(t, img, delayFile, delayMagic, delayVersion, body)
	})
}

// FuzzTimerProgressFile: the timer service's progress (timer.json).
func FuzzTimerProgressFile(f *testing.F) {
	img := newStoreImage(f)
	f.Add(img.configBody(f, timerFile))
	for _, s := range []string{`{}`, `null`, `{"enqueued":-1}`, `{"enqueued":9223372036854775807}`, `{"enqueued":1.5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkConfigBody(t, img, timerFile, timerMagic, timerVersion, body)
	})
}

// FuzzStoreFormatFile: the recorded store format (store.json). The store
// is opened with its SegmentSize set, so another size in range is refused
// with ErrInvalidArgument (as documented) instead of being adopted.
func FuzzStoreFormatFile(f *testing.F) {
	img := newStoreImage(f)
	f.Add(img.configBody(f, formatFile))
	for _, s := range []string{`{}`, `null`, `{"segment_size":0}`, `{"segment_size":-1}`, `{"segment_size":4096}`,
		`{"segment_size":1099511627777}`, `{"segment_size":"65536"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkConfigBody(t, img, formatFile, formatMagic, formatVersion, body, ErrInvalidArgument)
	})
}

// FuzzCheckpointFile: the checkpoint, with a valid magic, version and CRC
// but any offsets, after a clean or an unclean shutdown. A checkpoint that
// does not fit the log is recovered without, or refused with ErrCorrupt.
func FuzzCheckpointFile(f *testing.F) {
	img := newStoreImage(f)
	cp, err := decodeCheckpoint("", img.files[filepath.Join(imageDir, checkpointName)])
	require.NoError(f, err)
	f.Add(cp.flushed, cp.dispatched, false)
	f.Add(cp.flushed, cp.dispatched, true)
	f.Add(int64(0), int64(0), true)
	f.Add(int64(1), cp.dispatched-1, false)
	f.Add(int64(1)<<62, int64(1)<<62, true)
	f.Fuzz(func(t *testing.T, flushed, dispatched int64, crashed bool) {
		if flushed < 0 || dispatched < 0 {
			return // refused by decodeCheckpoint, as any damage: see TestCheckpoint*
		}
		b := checkpoint{flushed: flushed, dispatched: dispatched, marks: cp.marks, marksAt: cp.marksAt}.encode()
		if crashed {
			img := *img
			img.files = maps.Clone(img.files)
			img.files[filepath.Join(imageDir, abortName)] = nil
			checkImageStore(t, &img, filepath.Join(imageDir, checkpointName), b)
			return
		}
		checkImageStore(t, img, filepath.Join(imageDir, checkpointName), b)
	})
}
