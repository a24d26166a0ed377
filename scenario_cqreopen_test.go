package mqlite

// Consecutive Opens of a store whose ConsumeQueue files are damaged must
// agree: the second Open (after the first's clean Close) fails the same
// way, or serves exactly the messages the first served, in the same
// order, and fails on the same entries. A first Open that accepts damage
// it did not look at, or hides entries, and leaves the next Open to find
// them, breaks that (the CommitLog's window fix, fbd4e47, for the
// ConsumeQueue). The store here has nine ConsumeQueue files a queue, so
// that recovery's window (the newest three) leaves files trusted.

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/indexfile"
	"github.com/mqlite/mqlite/vfs"
)

const (
	cqTopic  = "orders"
	cqQueues = 2
	cqPerQ   = 70 // messages a queue: 9 files of fzOptions' 8 entries
)

// cqGolden is the closed store the reopen tests damage, as an fzGolden
// (files, sizes, dirs and checkpoint, for the mutation scripts) with the
// CommitLog offsets of each queue's messages in queue order.
type cqGolden struct {
	*fzGolden
	offs [cqQueues][]int64
}

var (
	cqOnce sync.Once
	cqGold *cqGolden
	cqErr  error
)

func cqGoldenStore(tb testing.TB) *cqGolden {
	tb.Helper()
	cqOnce.Do(func() { cqGold, cqErr = buildCQGolden() })
	if cqErr != nil {
		tb.Fatalf("golden store: %v", cqErr)
	}
	return cqGold
}

func buildCQGolden() (*cqGolden, error) {
	fs := vfs.NewMem()
	s, err := openFS(fs, fzDir, fzOptions())
	if err != nil {
		return nil, err
	}
	g := &cqGolden{fzGolden: &fzGolden{fs: fs, sizes: map[string]int64{}}}
	err = s.CreateTopic(cqTopic, TopicConfig{Queues: cqQueues})
	ctx := context.Background()
	for i := 0; err == nil && i < cqQueues*cqPerQ; i++ {
		_, err = s.Put(ctx, &Message{Topic: cqTopic, Tags: fmt.Sprint("t", i%3), Body: []byte(fmt.Sprintf("m%03d", i))}, i%cqQueues)
	}
	if err == nil {
		err = s.WaitVisible(ctx)
	}
	for q := 0; err == nil && q < cqQueues; q++ {
		for m, rerr := range s.Messages(cqTopic, q, 0) {
			if err = rerr; err != nil {
				break
			}
			g.offs[q] = append(g.offs[q], m.CommitLogOffset)
		}
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	b, err := vfs.ReadFile(fs, path.Join(fzDir, checkpointName))
	if err == nil {
		g.checkpoint, err = decodeCheckpoint(checkpointName, b)
	}
	if err == nil {
		err = walkFS(fs, fzDir, func(p string, dir bool) {
			if dir {
				g.dirs = append(g.dirs, p)
				return
			}
			g.files = append(g.files, p)
			g.sizes[p], _, _ = fs.Stat(p)
		})
	}
	return g, err
}

// cqFile is the path of data file i of queue q of the golden store.
func cqFile(q, i int) string {
	return path.Join(fzDir, "consumequeue", cqTopic, fmt.Sprint(q), fmt.Sprintf("%020d", i*8*consumequeue.EntrySize))
}

// cqOutcome is what one Open of a damaged copy did: the error, or per
// queue the CommitLog offsets of the messages it served, in order, and
// the queue offsets whose reads failed.
type cqOutcome struct {
	err    error
	served [cqQueues][]int64
	failed [cqQueues][]int64
}

func (o *cqOutcome) String() string {
	if o.err != nil {
		return "error: " + o.err.Error()
	}
	var b strings.Builder
	for q := range cqQueues {
		fmt.Fprintf(&b, "queue %d: %d served, failed at %v; ", q, len(o.served[q]), o.failed[q])
	}
	return b.String()
}

// errClass is the kind of a failed Open: the sentinel it matches.
func errClass(err error) string {
	switch {
	case err == nil:
		return "none"
	case errors.Is(err, consumequeue.ErrIncompatible):
		return "consumequeue.ErrIncompatible"
	case errors.Is(err, indexfile.ErrVersion):
		return "indexfile.ErrVersion"
	case errors.Is(err, ErrCorrupt):
		return "ErrCorrupt"
	}
	return "other: " + err.Error()
}

// cqOpen opens the store in fzDir on fs, reads every queue whole (stepping
// over entries that fail) and closes it.
func cqOpen(t *testing.T, fs vfs.FS) *cqOutcome {
	s, err := openFS(fs, fzDir, fzOptions())
	if err != nil {
		require.Nil(t, s)
		return &cqOutcome{err: err}
	}
	o := &cqOutcome{}
	for q := range cqQueues {
		ms, _ := readQueue(s, cqTopic, q, func(off int64) { o.failed[q] = append(o.failed[q], off) })
		for _, m := range ms {
			o.served[q] = append(o.served[q], m.CommitLogOffset)
		}
	}
	require.NoError(t, s.Close())
	require.Zero(t, fzGoroutines(), "goroutines left by Close")
	return o
}

// cqReopen applies muts to a copy of the golden store (with the abort
// marker of a crashed process if crash), opens it twice and checks that
// the Opens agree. It returns the first Open's outcome.
func cqReopen(t *testing.T, g *cqGolden, muts []mutation, crash bool) *cqOutcome {
	fs := vfs.NewMem()
	require.NoError(t, g.copyTo(fs, fzDir))
	for _, m := range muts {
		require.NoError(t, m.apply(fs, fzDir), m)
	}
	if crash {
		require.NoError(t, writeWhole(fs, path.Join(fzDir, abortName), nil))
	}
	first := cqOpen(t, fs)
	second := cqOpen(t, fs)
	what := fmt.Sprintf("%v crash=%v\nfirst:  %v\nsecond: %v", muts, crash, first, second)
	require.Equal(t, errClass(first.err), errClass(second.err), what)
	if first.err != nil {
		var a, b *CorruptError
		if errors.As(first.err, &a) && errors.As(second.err, &b) {
			require.Equal(t, a.Path, b.Path, what)
		}
		return first
	}
	for q := range cqQueues {
		for _, off := range first.served[q] {
			require.Contains(t, second.served[q], off, "queue %d: the second Open lost a message the first served: %s", q, what)
		}
		require.Equal(t, first.served[q], second.served[q], "queue %d: %s", q, what)
		require.Equal(t, first.failed[q], second.failed[q], "queue %d: %s", q, what)
	}
	return first
}

// cqCut is the mutations that cut the CommitLog at off (a record start):
// the segment holding it is truncated there, the later ones removed.
func (g *cqGolden) cqCut(off int64) []mutation {
	var muts []mutation
	for i := int64(0); ; i++ {
		seg := path.Join(fzDir, "commitlog", fmt.Sprintf("%020d", i*commitlog.MinSegmentSize))
		if _, ok := g.sizes[seg]; !ok {
			return muts
		}
		switch start := i * commitlog.MinSegmentSize; {
		case start+commitlog.MinSegmentSize <= off:
		case start <= off:
			muts = append(muts, mutation{kind: mutTruncate, file: seg, n: off - start})
		default:
			muts = append(muts, mutation{kind: mutDelete, file: seg})
		}
	}
}

func TestConsumeQueueDamageReopenAgrees(t *testing.T) {
	g := cqGoldenStore(t)
	for q := range cqQueues {
		require.Len(t, g.offs[q], cqPerQ)
	}
	const e = consumequeue.EntrySize
	flip := func(file string, entry, byteInEntry int) mutation {
		return mutation{kind: mutFlip, file: file, off: int64(entry*e + byteInEntry), bit: 3}
	}
	trunc := func(file string, n int64) mutation { return mutation{kind: mutTruncate, file: file, n: n} }
	del := func(file string) mutation { return mutation{kind: mutDelete, file: file} }
	meta := path.Join(fzDir, "consumequeue", cqTopic, "0", "meta")
	all := func(q int) []mutation {
		var muts []mutation
		for i := range 9 {
			muts = append(muts, del(cqFile(q, i)))
		}
		return muts
	}
	// Queue 0 offsets: file i holds entries 8i to 8i+7; the last file
	// (8) holds 64 to 69. Recovery scans files 6 to 8.
	type want struct {
		err    string  // errClass of the Open, "none" if it opens
		served int     // messages queue 0 serves
		failed []int64 // queue 0 offsets whose reads fail
	}
	cases := []struct {
		name string
		muts []mutation
		want want
	}{
		{"flip the last entry", []mutation{flip(cqFile(0, 8), 5, 3)}, want{"none", 70, nil}},
		{"flip the tail entries", []mutation{flip(cqFile(0, 8), 3, 0), flip(cqFile(0, 8), 4, 9), flip(cqFile(0, 8), 5, 19)},
			want{"none", 70, nil}},
		{"flip a middle entry of the last file", []mutation{flip(cqFile(0, 8), 2, 1)}, want{"none", 70, nil}},
		{"flip an entry in a file the window scans", []mutation{flip(cqFile(0, 6), 4, 1)}, want{"none", 70, nil}},
		// Outside the window: found when read, and the same every Open.
		{"flip a middle entry of a trusted file", []mutation{flip(cqFile(0, 2), 3, 2)}, want{"none", 69, []int64{19}}},
		// Retention's search for the queue's first entry took the damaged
		// entry for one below the CommitLog's start, and every entry before
		// it out of the queue (silently: entry 0 was never served).
		{"flip the second entry of the first file", []mutation{flip(cqFile(0, 0), 1, 2)}, want{"none", 69, []int64{1}}},
		// ... and with the tail dropped, that search saw a shorter queue
		// than the next Open's: the first Open hid entries 0 to 32, the
		// second served them.
		{"flip the first entry of a trusted file, the last file empty", []mutation{flip(cqFile(0, 4), 0, 2), trunc(cqFile(0, 8), 0)},
			want{"none", 69, []int64{32}}},
		{"truncate the last file mid-entry", []mutation{trunc(cqFile(0, 8), 50)}, want{"none", 70, nil}},
		{"truncate a trusted file mid-entry", []mutation{trunc(cqFile(0, 2), 50)}, want{"none", 70, nil}},
		{"zero-length last file", []mutation{trunc(cqFile(0, 8), 0)}, want{"none", 70, nil}},
		{"zero-length trusted file", []mutation{trunc(cqFile(0, 2), 0)}, want{"none", 70, nil}},
		{"zero-length first file", []mutation{trunc(cqFile(0, 0), 0)}, want{"none", 70, nil}},
		{"missing trusted file", []mutation{del(cqFile(0, 2))}, want{"none", 70, nil}},
		// What retention leaves: the queue starts at the second file.
		{"missing first file", []mutation{del(cqFile(0, 0))}, want{"none", 62, nil}},
		// Told from a queue whose last file is full by the checkpoint's
		// mark (queue 0 counted 70): rebuilt from the CommitLog.
		{"missing last file", []mutation{del(cqFile(0, 8))}, want{"none", 70, nil}},
		// The meta file without data files: the first file is never
		// removed, so it was lost, and re-dispatch rebuilds the queue.
		{"missing every data file", all(0), want{"none", 70, nil}},
		// The CommitLog lost its records from queue 0's entry 56 on: the
		// queue ends in file 6, and the next Open scans files 4 to 6.
		// The flipped entry in file 5 must be found now, not by it.
		{"flip a trusted entry, the CommitLog cut", append([]mutation{flip(cqFile(0, 5), 3, 2)}, g.cqCut(g.offs[0][56])...),
			want{"none", 56, nil}},
		{"flip a trusted entry, the CommitLog cut further back", append([]mutation{flip(cqFile(0, 1), 3, 2)}, g.cqCut(g.offs[0][30])...),
			want{"none", 30, nil}},
		{"flip the meta version", []mutation{flip(meta, 0, 5)}, want{"ErrCorrupt", 0, nil}},
		{"flip the meta entries per file", []mutation{flip(meta, 0, 9)}, want{"ErrCorrupt", 0, nil}},
		{"flip the meta checksum", []mutation{flip(meta, 0, 13)}, want{"ErrCorrupt", 0, nil}},
		{"truncate the meta file", []mutation{trunc(meta, 6)}, want{"ErrCorrupt", 0, nil}},
		{"missing meta file", []mutation{del(meta)}, want{"ErrCorrupt", 0, nil}},
	}
	for _, c := range cases {
		for _, crash := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/crash=%v", c.name, crash), func(t *testing.T) {
				got := cqReopen(t, g, c.muts, crash)
				require.Equal(t, c.want.err, errClass(got.err), "%v", got)
				if got.err != nil {
					return
				}
				require.Len(t, got.served[0], c.want.served, "%v", got)
				require.Equal(t, c.want.failed, got.failed[0], "%v", got)
				// Whatever is served is the golden queue's, in order:
				// only failed entries (and, at the front, the first
				// file) or a cut CommitLog's records are missing.
				want := slices.DeleteFunc(slices.Clone(g.offs[0]), func(off int64) bool { return !slices.Contains(got.served[0], off) })
				require.Equal(t, want, got.served[0])
				require.Equal(t, g.offs[1][:len(got.served[1])], got.served[1], "queue 1")
			})
		}
	}
}

// FuzzReopenDamagedConsumeQueue: TestConsumeQueueDamageReopenAgrees with
// fuzzed damage, scripts as FuzzOpenCorruptedDir's (fuzz_dir_script_test.go)
// over the files of the many-file golden store, with and without the
// abort marker: the two Opens must agree. The seeds damage ConsumeQueue
// files, alone and with a cut CommitLog.
//
//	go test -run '^$' -fuzz '^FuzzReopenDamagedConsumeQueue$' -fuzztime 5m -parallel 1 .
func FuzzReopenDamagedConsumeQueue(f *testing.F) {
	g := cqGoldenStore(f)
	idx := func(p string) int { return g.fileIndex(p) }
	lastSeg := 0
	for i, p := range g.files {
		if path.Dir(p) == path.Join(fzDir, "commitlog") {
			lastSeg = i
		}
	}
	for _, s := range [][]byte{
		{},
		fzOp(mutFlip, idx(cqFile(0, 8)), 100, 0, 3),
		fzOp(mutFlip, idx(cqFile(0, 2)), 62, 0, 1),
		fzOp(mutZero, idx(cqFile(0, 0)), 20, 20, 0),
		fzOp(mutTruncate, idx(cqFile(1, 4)), 50, 0, 0),
		fzOp(mutDelete, idx(cqFile(1, 8)), 0, 0, 0),
		fzOp(mutFlip, idx(path.Join(fzDir, "consumequeue", cqTopic, "0", "meta")), 5, 0, 2),
		append(fzOp(mutFlip, idx(cqFile(0, 5)), 62, 0, 3), fzOp(mutTruncate, lastSeg, 300, 0, 0)...),
		append(fzOp(mutFlip, idx(cqFile(0, 4)), 2, 0, 3), fzOp(mutTruncate, idx(cqFile(0, 8)), 0, 0, 0)...),
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, script []byte, crash bool) {
		for i := 0; i < len(script); i += fzOpSize {
			if mutKind(script[i]%byte(mutKinds)) == mutOffsets {
				script[i] = byte(mutFlip) // the store has no consumer offsets file
			}
		}
		cqReopen(t, g, g.decodeScript(script), crash)
	})
}
