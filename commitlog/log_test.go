package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// bytesAppender appends a fixed payload.
type bytesAppender []byte

func (b bytesAppender) PayloadSize() int                     { return len(b) }
func (b bytesAppender) EncodePayload(dst []byte, phys int64) { copy(dst, b) }

func payload(i, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(i), uint64(n)))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

type fsCase struct {
	name string
	fs   func(t *testing.T) (vfs.FS, string)
}

var fsCases = []fsCase{
	{"mem", func(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), "/store/commitlog" }},
	{"os", func(t *testing.T) (vfs.FS, string) { return vfs.OS, filepath.Join(t.TempDir(), "commitlog") }},
	// The OS under Windows' rule: no remove, rename or truncate of a
	// mapped file.
	{"strict", func(t *testing.T) (vfs.FS, string) {
		return vfs.NewStrictMapFS(vfs.OS), filepath.Join(t.TempDir(), "commitlog")
	}},
}

func openLog(t *testing.T, fs vfs.FS, dir string, seg int64) *Log {
	t.Helper()
	l, err := Open(Options{Dir: dir, FS: fs, SegmentSize: seg, RecoverFrom: -1})
	require.NoError(t, err)
	return l
}

func TestAppendAcrossSegmentsReadsBack(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.fs(t)
			l := openLog(t, fs, dir, 4096)
			var offs []int64
			var want [][]byte
			for i := range 300 {
				p := payload(i, 1+i*7%900)
				off, err := l.Append(bytesAppender(p))
				require.NoError(t, err)
				offs = append(offs, off)
				want = append(want, p)
			}
			require.Greater(t, len(l.snap.Load().segs), 20, "boundaries crossed")
			check := func(l *Log) {
				for i, off := range offs {
					require.NoError(t, l.Read(off, func(r Record) error {
						if !bytes.Equal(r.Payload, want[i]) {
							return fmt.Errorf("record %d differs", i)
						}
						return nil
					}))
				}
				var got int
				next, err := l.Scan(l.MinOffset(), l.WrotePosition(), true, func(r Record) error {
					require.Equal(t, offs[got], r.Offset)
					got++
					return nil
				})
				require.NoError(t, err)
				require.Equal(t, len(offs), got)
				require.Equal(t, l.WrotePosition(), next)
			}
			check(l)
			end := l.WrotePosition()
			require.NoError(t, l.Close())
			require.NoError(t, l.Close(), "idempotent")
			_, err := l.Append(bytesAppender("x"))
			require.ErrorIs(t, err, ErrClosed)

			l = openLog(t, fs, dir, 4096)
			defer l.Close()
			require.Equal(t, end, l.WrotePosition())
			check(l)
			require.Zero(t, l.Report().TruncatedBytes)
		})
	}
}

func TestConcurrentAppends(t *testing.T) {
	fs, dir := vfs.NewMem(), "/cl"
	l := openLog(t, fs, dir, 8192)
	defer l.Close()
	const writers, each = 16, 200
	offs := make([][]int64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				off, err := l.Append(bytesAppender(payload(w*each+i, 50+i%200)))
				if err != nil {
					t.Error(err)
					return
				}
				offs[w] = append(offs[w], off)
			}
		})
	}
	wg.Wait()
	for w := range writers {
		for i, off := range offs[w] {
			want := payload(w*each+i, 50+i%200)
			require.NoError(t, l.Read(off, func(r Record) error {
				if !bytes.Equal(r.Payload, want) {
					return errors.New("mismatch")
				}
				return nil
			}))
		}
	}
}

func TestBadInputs(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "/cl", 4096)
	defer l.Close()
	_, err := l.Append(bytesAppender(make([]byte, 5000)))
	require.ErrorIs(t, err, ErrMessageTooLarge)
	require.Zero(t, l.WrotePosition())
	require.ErrorIs(t, l.Read(0, func(Record) error { return nil }), ErrNotFound)
	off, err := l.Append(bytesAppender("hello"))
	require.NoError(t, err)
	require.ErrorIs(t, l.Read(off+1, func(Record) error { return nil }), ErrNotFound)
	_, err = Open(Options{})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestFlushFailureFences(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	l := openLog(t, ffs, "/cl", 4096)
	defer l.Close()
	_, err := l.Append(bytesAppender("a"))
	require.NoError(t, err)
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpMapSync {
			return os.ErrInvalid
		}
		return nil
	})
	before := l.FlushedPosition()
	_, err = l.Flush()
	require.ErrorIs(t, err, ErrFenced)
	require.Equal(t, before, l.FlushedPosition())
	ffs.SetInjector(nil)
	_, err = l.Append(bytesAppender("b"))
	require.ErrorIs(t, err, ErrFenced)
	_, err = l.Flush()
	require.ErrorIs(t, err, ErrFenced)
}
