package mqlite

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// TestReplicaIndexesLargeChunksFromTheirBytes: a replica catching up a
// backlog in chunks of 64 KiB or more dispatches their records from the
// received bytes (dispatch_chunk.go), across segment rolls, and ends with
// the indexes the primary built: the same ConsumeQueue files byte for
// byte, the same answers to queue reads, MessageByID and MessagesByKey,
// and a clean Verify. Both flush modes. A chunk the dispatcher is not at
// is left to its loop.
func TestReplicaIndexesLargeChunksFromTheirBytes(t *testing.T) {
	for _, flush := range []FlushMode{FlushAsync, FlushSync} {
		t.Run(flush.String(), func(t *testing.T) {
			clk := clock.NewFake(t0)
			pfs, rfs := vfs.NewMem(), vfs.NewMem()
			o := replOpts(clk, Options{Flush: flush, SegmentSize: 1 << 20})
			p, err := openFS(pfs, "/p", o)
			require.NoError(t, err)
			defer p.Close()
			require.NoError(t, p.CreateTopic("orders", TopicConfig{Queues: 4}))
			keys := mixedSends(t, p, clk, 0)
			ctx := context.Background()
			for i := 0; p.log.WrotePosition() < 2<<20+300<<10; i++ {
				k := fmt.Sprintf("big-%d", i%50)
				keys = append(keys, k)
				_, err := p.Put(ctx, &Message{Topic: "orders", Keys: []string{k, "all"}, Tags: "t",
					Body: bytes.Repeat([]byte{byte(i)}, 1000+(i*733)%4000)}, i%4)
				require.NoError(t, err)
			}
			keys = append(keys, "all")
			keys = append(keys, mixedSends(t, p, clk, 1)...)

			r := openReplica(t, rfs, "/r", o)
			defer r.Close()
			stop := link(p, r, nil)
			end := caughtUp(t, p, r)
			perr, rerr := stop()
			require.ErrorIs(t, perr, context.Canceled)
			require.ErrorIs(t, rerr, context.Canceled)

			r.disp.run.Lock()
			chunked := r.disp.chunked
			r.disp.run.Unlock()
			require.Greater(t, chunked, int64(500), "most records were dispatched from the chunks' bytes")
			require.Greater(t, len(p.log.Segments()), 2, "the log rolled segments")
			require.True(t, bytes.Equal(logBytes(t, pfs, p, end), logBytes(t, rfs, r, end)), "byte-identical CommitLogs")
			sameAnswers(t, p, r, keys)
			require.Equal(t, treeBytes(t, pfs, "/p/consumequeue"), treeBytes(t, rfs, "/r/consumequeue"), "identical ConsumeQueue files")
			rep, err := r.Verify(ctx, nil)
			require.NoError(t, err)
			require.True(t, rep.OK, "%+v", rep)

			// A chunk that does not start where the dispatcher stands, or
			// that is not in the log, is left to the loop: nothing changes.
			junk := bytes.Repeat([]byte{7}, chunkDispatchMin)
			require.False(t, r.disp.dispatchChunk(end-100, junk))
			require.False(t, r.disp.dispatchChunk(end, junk))
			r.disp.run.Lock()
			require.Equal(t, chunked, r.disp.chunked)
			require.Equal(t, end, r.disp.next)
			r.disp.run.Unlock()
			require.Equal(t, end, r.disp.dispatched())
		})
	}
}

// treeBytes maps each file under dir (relative name) to its contents.
func treeBytes(t *testing.T, fs vfs.FS, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	var walk func(rel string)
	walk = func(rel string) {
		names, err := fs.ReadDir(path.Join(dir, rel))
		require.NoError(t, err)
		for _, n := range names {
			name := path.Join(rel, n)
			_, isDir, err := fs.Stat(path.Join(dir, name))
			require.NoError(t, err)
			if isDir {
				walk(name)
				continue
			}
			b, err := vfs.ReadFile(fs, path.Join(dir, name))
			require.NoError(t, err)
			out[name] = b
		}
	}
	walk("")
	require.NotEmpty(t, out)
	return out
}
