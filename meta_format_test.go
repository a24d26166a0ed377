package mqlite

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// TestStoreFormatIsKept: a reopen with default options adopts the
// recorded segment size, a conflicting one is refused, and a smaller
// message limit does not make recovery drop larger records.
func TestStoreFormatIsKept(t *testing.T) {
	fs := vfs.NewMem()
	s, err := openFS(fs, "/f", &Options{SegmentSize: 64 << 10})
	require.NoError(t, err)
	big, err := s.Put(context.Background(), &Message{Topic: "t", Body: make([]byte, 40<<10)}, 0)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	_, err = openFS(fs, "/f", &Options{SegmentSize: 128 << 10})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "created with SegmentSize 65536")

	// An unclean shutdown, so recovery validates every record again.
	f, err := fs.OpenFile("/f/abort", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	s, err = openFS(fs, "/f", &Options{MaxMessageSize: 1024})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, int64(64<<10), s.opts.SegmentSize)
	require.Zero(t, s.Recovery().TruncatedBytes)
	m, err := s.MessageByID(big.MsgID())
	require.NoError(t, err)
	require.Len(t, m.Body, 40<<10)
	_, err = s.Put(context.Background(), &Message{Topic: "t", Body: make([]byte, 2048)}, 0)
	require.ErrorIs(t, err, ErrMessageTooLarge, "the new limit applies to new messages")
}
