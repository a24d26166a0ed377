package mqlite

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// TestReplicaChunksSmallerThanRecords: with a ChunkSize below some record
// sizes the sender grows its buffer for a whole record and keeps sending
// chunks from it; the logs stay byte-identical.
func TestReplicaChunksSmallerThanRecords(t *testing.T) {
	ctx := context.Background()
	pfs, rfs := vfs.NewMem(), vfs.NewMem()
	o := replOpts(clock.Real, Options{Replication: ReplicationOptions{ChunkSize: 512}})
	p, err := openFS(pfs, "/p", o)
	require.NoError(t, err)
	defer p.Close()
	r := openReplica(t, rfs, "/r", o)
	defer r.Close()
	sizes := []int{10, 3000, 100, 600, 5000, 1, 400, 2000}
	for i := range 40 { // a backlog first
		_, err := p.Put(ctx, &Message{Topic: "t", Body: bytes.Repeat([]byte{byte(i)}, sizes[i%len(sizes)])}, i%3)
		require.NoError(t, err)
	}
	stop := link(p, r, nil)
	for i := range 20 {
		_, err := p.Put(ctx, &Message{Topic: "t", Body: bytes.Repeat([]byte{byte(i)}, sizes[(i+3)%len(sizes)])}, 0)
		require.NoError(t, err)
	}
	end := caughtUp(t, p, r)
	stop()
	require.Equal(t, logBytes(t, pfs, p, end), logBytes(t, rfs, r, end))
	sameAnswers(t, p, r, nil)
}

// TestReplicationWireVersion: the wire is at version 2 (a chunk's frame
// CRC covers only what its records' CRCs do not); a version 1 peer's hello
// or reply is refused with ErrInvalidArgument.
func TestReplicationWireVersion(t *testing.T) {
	require.EqualValues(t, 2, wireVersion)
	var hb, rb bytes.Buffer
	require.NoError(t, writeHello(&hb, hello{segment: 1 << 20}))
	require.NoError(t, writeReply(&rb, reply{segment: 1 << 20}))
	_, err := readHello(bytes.NewReader(hb.Bytes()))
	require.NoError(t, err)
	for _, b := range [][]byte{hb.Bytes(), rb.Bytes()} {
		wle.PutUint32(b[4:], 1)
	}
	_, err = readHello(bytes.NewReader(hb.Bytes()))
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = readReply(bytes.NewReader(rb.Bytes()))
	require.ErrorIs(t, err, ErrInvalidArgument)
}
