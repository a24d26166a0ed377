package mqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
	"github.com/stretchr/testify/require"
)

// Under the Windows rule (vfs.StrictMapFS: no remove, rename or truncate
// of a mapped file), a store with small segments writes, rolls, deletes by
// retention, recycles spares (on the OS), writes its config files, closes
// and reopens with every message it kept, in memory and on the OS.
func TestStrictMapFSLifecycle(t *testing.T) {
	for _, c := range []struct {
		name  string
		inner vfs.FS
		dir   string
	}{{"mem", vfs.NewMem(), "/win"}, {"os", vfs.OS, filepath.Join(t.TempDir(), "win")}} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewStrictMapFS(c.inner)
			clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
			opts := &Options{Clock: clk, SegmentSize: 64 << 10, Retention: 2 * time.Hour,
				// The fake clock runs from 12:00 to 21:00: the store's own
				// retention pass, at DeleteHour, must not run before the
				// test's CleanExpired (farHour is far from the real clock),
				// nor may a short disk start it early: on the real volume
				// (the "os" case) a disk above CleanRatio used did, and the
				// test's pass then found nothing left to delete.
				ConsumeQueueEntries: 64, IndexEntries: 256, IndexSlots: 64, DeleteHour: 3,
				CleanRatio: 1, ForceCleanRatio: 1, DiskMaxUsedRatio: 1}
			s, err := openFS(fs, c.dir, opts)
			require.NoError(t, err)
			first := s
			defer first.Close() // a failure below leaves no store running
			require.NoError(t, s.CreateTopic("ret", TopicConfig{Queues: 1}))
			pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
			require.NoError(t, err)
			require.NoError(t, pc.Subscribe("ret", nil))

			fillHours(t, s, clk, 6, 150)
			rep, err := s.CleanExpired()
			require.NoError(t, err)
			require.Positive(t, rep.Segments, "retention deleted segments")
			ids := fillHours(t, s, clk, 3, 150) // rolls onto spares on the OS
			rep, err = s.CleanExpired()
			require.NoError(t, err)
			require.Positive(t, rep.Segments)
			if c.name == "os" {
				require.Positive(t, s.log.Recycled(), "spares were recycled")
			}
			got, err := pc.Poll(context.Background(), 10)
			require.NoError(t, err)
			require.NotEmpty(t, got)
			require.NoError(t, pc.Commit(), "offsets written atomically")
			require.NoError(t, pc.Close())
			require.NoError(t, s.Close())
			require.Zero(t, fs.MappedFiles(), "Close unmapped everything")

			s, err = openFS(fs, c.dir, opts)
			require.NoError(t, err)
			defer s.Close()
			for _, id := range ids[len(ids)-150:] {
				_, err := s.MessageByID(id)
				require.NoError(t, err)
			}
			_, err = s.Put(context.Background(), &Message{Topic: "ret", Body: []byte("after")}, 0)
			require.NoError(t, err)
		})
	}
}
