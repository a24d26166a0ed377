package commitlog

import (
	"testing"

	"github.com/mqlite/mqlite/vfs"
	"github.com/stretchr/testify/require"
)

// Under the Windows rule (vfs.StrictMapFS), DeleteBefore retires the
// oldest segment, and its file goes once it is unmapped: a reader inside
// it keeps the file until its callback returns, and DeleteBefore goes no
// further meanwhile, so files still go oldest first. The log then closes
// with nothing mapped and reopens at the new minimum.
func TestUnmapFirstDeleteWaitsForReader(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			inner, dir := fc.fs(t)
			fs := vfs.NewStrictMapFS(inner)
			l := openCountedLog(t, fs, dir, MinSegmentSize)
			offs := fillSegments(t, l, 4)
			segs := l.Segments()
			inside, proceed, readDone := make(chan struct{}), make(chan struct{}), make(chan error)
			go func() {
				readDone <- l.Read(offs[0], func(r Record) error {
					close(inside)
					<-proceed
					_, err := checkIndexed(r)
					return err
				})
			}()
			<-inside
			rep, err := l.DeleteBefore(segs[2].Start)
			require.NoError(t, err)
			require.Equal(t, 1, rep.Segments, "stops at the segment a reader holds")
			require.Equal(t, segs[1].Start, l.MinOffset())
			require.True(t, vfs.Exists(fs, segs[0].Path), "its file waits for the reader")
			require.Equal(t, 1, fs.Mapped(segs[0].Path))
			requireRemoved(t, l.Read(offs[0], func(Record) error { return nil }))
			rep, err = l.DeleteBefore(segs[2].Start)
			require.NoError(t, err)
			require.Zero(t, rep.Segments, "nothing more while the first file is there")

			close(proceed)
			require.NoError(t, <-readDone)
			require.False(t, vfs.Exists(fs, segs[0].Path), "gone when the reader returned")
			require.Zero(t, fs.Mapped(segs[0].Path))
			rep, err = l.DeleteBefore(segs[2].Start)
			require.NoError(t, err)
			require.Equal(t, 1, rep.Segments)
			require.False(t, vfs.Exists(fs, segs[1].Path))
			require.NoError(t, l.Close())
			require.Zero(t, fs.MappedFiles(), "Close unmapped everything")

			l = openCountedLog(t, fs, dir, MinSegmentSize)
			defer l.Close()
			require.Equal(t, segs[2].Start, l.MinOffset())
			last := offs[len(offs)-1]
			require.NoError(t, l.Read(last, func(r Record) error { _, err := checkIndexed(r); return err }))
			_, err = l.Append(indexed(len(offs)))
			require.NoError(t, err)
		})
	}
}
