package mqlite

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/txn"
)

// Header of the files other packages own, as they write them.
const (
	topicsMagic, topicsVersion     = 0x4D515450, 1
	txnMagic, txnVersion           = 0x4D515458, 1
	offsetsMagic, offsetsVersion   = consumer.OffsetsMagic, consumer.FormatVersion
	deepNestingDepth               = 20000
	deepNestingOpen, deepNestingUp = `{"1":`, `}`
)

// TestSemanticallyBadConfigFailsOpen: a config file whose header is valid
// but whose body could never have been written fails Open with an
// ErrCorrupt naming the file and the bad field, before Open changes any
// file (no abort marker, no index rebuilt, no system topic created).
func TestSemanticallyBadConfigFailsOpen(t *testing.T) {
	img := newStoreImage(t)
	deep := strings.Repeat(deepNestingOpen, deepNestingDepth) + "1" + strings.Repeat(deepNestingUp, deepNestingDepth)
	cases := []struct {
		name, file     string
		magic, version uint32
		body, reason   string
	}{
		{"delay: null (a nil map: panic at the first delivery)", delayFile, delayMagic, delayVersion, `null`, "null"},
		{"delay: array", delayFile, delayMagic, delayVersion, `[1]`, "bad body"},
		{"delay: level 0", delayFile, delayMagic, delayVersion, `{"0":1}`, `level "0"`},
		{"delay: level 65", delayFile, delayMagic, delayVersion, `{"65":1}`, `level "65"`},
		{"delay: level not canonical", delayFile, delayMagic, delayVersion, `{"01":1}`, `level "01"`},
		{"delay: level not a number", delayFile, delayMagic, delayVersion, `{"x":1}`, `level "x"`},
		{"delay: negative offset", delayFile, delayMagic, delayVersion, `{"3":-1}`, "level 3: negative offset -1"},
		{"delay: offset as a string", delayFile, delayMagic, delayVersion, `{"3":"1"}`, "bad body"},
		{"delay: deep nesting", delayFile, delayMagic, delayVersion, deep, "bad body"},
		{"timer: null", timerFile, timerMagic, timerVersion, `null`, "null"},
		{"timer: negative", timerFile, timerMagic, timerVersion, `{"enqueued":-1}`, "negative enqueued offset -1"},
		{"timer: fraction", timerFile, timerMagic, timerVersion, `{"enqueued":1.5}`, "bad body"},
		{"timer: string", timerFile, timerMagic, timerVersion, `{"enqueued":"1"}`, "bad body"},
		{"format: null", formatFile, formatMagic, formatVersion, `null`, "null"},
		{"format: no segment size", formatFile, formatMagic, formatVersion, `{}`, "segment_size 0"},
		{"format: negative segment size", formatFile, formatMagic, formatVersion, `{"segment_size":-65536}`, "segment_size -65536"},
		{"format: segment size below the minimum", formatFile, formatMagic, formatVersion, `{"segment_size":4095}`, "segment_size 4095"},
		{"format: segment size above the maximum", formatFile, formatMagic, formatVersion, `{"segment_size":1099511627777}`, "segment_size 1099511627777"},
		{"topics: null", topic.File, topicsMagic, topicsVersion, `null`, "null"},
		{"topics: no queues", topic.File, topicsMagic, topicsVersion, `{"t":{"queues":0}}`, `topic "t"`},
		{"transactions: negative", txn.ProgressFile, txnMagic, txnVersion, `{"half":-1}`, "negative offsets"},
		{"offsets: negative", consumer.OffsetsFile, offsetsMagic, offsetsVersion, `{"offsets":[{"group":"g","topic":"t","queue":0,"offset":-1}]}`, "negative offset"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkConfigBody(t, img, c.file, c.magic, c.version, []byte(c.body))
			require.ErrorIs(t, err, ErrCorrupt)
			require.Contains(t, err.Error(), c.reason)
		})
	}
}

// The store format is checked before it is adopted: an Open with the
// default SegmentSize once took a missing or zero segment_size as the
// default size (growing the 64 KiB segment to 1 GiB, with a negative
// record limit).
func TestBadStoreFormatIsNotAdopted(t *testing.T) {
	img := newStoreImage(t)
	for _, body := range []string{`{}`, `{"segment_size":0}`, `{"segment_size":-1}`, `{"segment_size":100}`} {
		path := filepath.Join(imageDir, configDir, formatFile)
		fs := img.restore(t, map[string][]byte{path: cfgfile.Frame(formatMagic, formatVersion, []byte(body))})
		before := snapshotFS(t, fs, imageDir)
		o := imageOptions(t, clock.NewFake(img.now))
		o.SegmentSize = 0
		_, err := openFS(fs, imageDir, o)
		require.ErrorIs(t, err, ErrCorrupt, body)
		require.Contains(t, err.Error(), path)
		require.Equal(t, before, snapshotFS(t, fs, imageDir), body)
	}
}

// Progress past the end of its queue (the queue lost its tail after the
// progress was saved, or the file lies) is moved back to the end: new
// delayed and timer messages are delivered instead of waiting until the
// queue reaches the saved offset. checkImageStore sends and awaits them.
func TestProgressPastTheQueueEndIsMovedBack(t *testing.T) {
	img := newStoreImage(t)
	require.NoError(t, checkConfigBody(t, img, delayFile, delayMagic, delayVersion, []byte(`{"1":1000,"17":5,"64":7}`)))
	require.NoError(t, checkConfigBody(t, img, timerFile, timerMagic, timerVersion, []byte(`{"enqueued":1000}`)))
	// One past the end: moved back while Open runs, before a message sent
	// after it lands there (moved back by the service goroutines, a timer
	// sent at once was skipped so once in about 20 runs).
	delayEnd, timerEnd := img.queueEnd(t, topic.Schedule, 0), img.queueEnd(t, topic.Timer, 0)
	for range 20 {
		require.NoError(t, checkConfigBody(t, img, delayFile, delayMagic, delayVersion, fmt.Appendf(nil, `{"1":%d}`, delayEnd+1)))
		require.NoError(t, checkConfigBody(t, img, timerFile, timerMagic, timerVersion, fmt.Appendf(nil, `{"enqueued":%d}`, timerEnd+1)))
	}
	// And behind the truth: delivered messages are not delivered again.
	require.NoError(t, checkConfigBody(t, img, delayFile, delayMagic, delayVersion, []byte(`{}`)))
	require.NoError(t, checkConfigBody(t, img, timerFile, timerMagic, timerVersion, []byte(`{"enqueued":0}`)))
}

// A checkpoint with a valid checksum but offsets that do not fit the log
// is recovered without, after a clean or an unclean shutdown: nothing is
// lost. A dispatched offset inside a record (found by FuzzCheckpointFile:
// flushed 0, dispatched 1) failed Open with "bad magic" in the CommitLog.
func TestOddCheckpointIsRecoveredWithout(t *testing.T) {
	img := newStoreImage(t)
	cp, err := decodeCheckpoint("", img.files[filepath.Join(imageDir, checkpointName)])
	require.NoError(t, err)
	crashed := *img
	crashed.files = maps.Clone(img.files)
	crashed.files[filepath.Join(imageDir, abortName)] = nil
	for _, c := range []checkpoint{
		{flushed: 0, dispatched: 1},
		{flushed: cp.flushed, dispatched: cp.dispatched - 1},
		{flushed: cp.flushed, dispatched: cp.dispatched + 1},
		{flushed: cp.flushed, dispatched: 0},
		{flushed: 0, dispatched: 0},
		{flushed: 1 << 62, dispatched: 1 << 62},
		{flushed: cp.flushed + 1, dispatched: cp.dispatched},
	} {
		for _, img := range []*storeImage{img, &crashed} {
			require.NoError(t, checkImageStore(t, img, filepath.Join(imageDir, checkpointName), c.encode()), "%+v", c)
		}
	}
}
