package mqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadOnlyVerifyDamage is issue 35 item 3 in the library: a store
// whose only segment has a damaged record in the middle. A writable Open
// refuses it; a read-only one reads past the damage to the true end
// (RecoveryReport.DamagedRanges names it), its queues keep every entry,
// and Verify checks every record and reports the damage, as Verify of a
// writable store does.
func TestReadOnlyVerifyDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	opts := &Options{SegmentSize: 1 << 20, NoWarm: true}
	s, err := Open(dir, opts)
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 4}))
	ctx := context.Background()
	var rs []PutResult
	for i := range 2000 {
		r, err := s.Put(ctx, &Message{Topic: "t", Body: []byte(fmt.Sprintf("body-%04d", i))}, i%4)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	require.NoError(t, s.Close())
	bad := rs[30]
	flipLogBit(t, dir, bad.Offset+28+60, 3) // a payload byte: checksum mismatch

	_, err = Open(dir, opts)
	require.ErrorIs(t, err, ErrCorrupt, "recovery proves the damage")

	ro := *opts
	ro.ReadOnly = true
	r, err := Open(dir, &ro)
	require.NoError(t, err)
	defer r.Close()
	rec := r.Recovery()
	require.Equal(t, [][2]int64{{bad.Offset, rs[31].Offset}}, rec.DamagedRanges)
	require.Equal(t, rs[1999].Offset+int64(rs[1999].Size), rec.CommitLogEnd)
	for q := range 4 {
		max, err := r.MaxOffset("t", q)
		require.NoError(t, err)
		require.EqualValues(t, 500, max, "queue %d", q)
	}
	_, err = r.MessageByID(bad.MsgID())
	require.ErrorIs(t, err, ErrCorrupt)
	m, err := r.MessageByID(rs[1999].MsgID())
	require.NoError(t, err)
	require.Equal(t, "body-1999", string(m.Body))

	rep, err := r.Verify(ctx, nil)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.EqualValues(t, 1999, rep.Records, "every record but the damaged one")
	require.Len(t, rep.Problems, 2, "%q", rep.Problems) // the record, and its queue entry
	require.Contains(t, rep.Problems[0], fmt.Sprintf("commitlog offset %d ", bad.Offset))
}
