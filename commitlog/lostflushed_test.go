package commitlog

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLostFlushedTail: a tail that the checkpoint says was flushed and
// that is gone with nothing valid after it (the last segment file
// missing, the last records zeroed after a clean close, a cut) is still
// taken as the end, as a torn tail is (S8a), but Report.LostFlushed says
// how many flushed bytes it cost. Found by FuzzOpenCorruptedDir: a missing
// last segment was reported nowhere.
func TestLostFlushedTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	base := buildLog(t, rng, MinSegmentSize, 3, 3, 50, 300)
	last := base.end / base.seg * base.seg
	lastRec := base.recs[len(base.recs)-1]
	cases := []struct {
		name    string
		damage  func(tl *testLog)
		wantEnd int64
	}{
		{"missing-last-segment", func(tl *testLog) { require.NoError(t, tl.fs.Remove(tl.segPath(last))) }, last},
		{"zeroed-last-record", func(tl *testLog) {
			editFile(t, tl.fs, tl.segPath(last), func(b []byte) []byte { clear(b[lastRec.off-last:]); return b })
		}, lastRec.off},
		{"cut-last-record", func(tl *testLog) { truncateFile(t, tl.fs, tl.segPath(last), lastRec.off-last+3) }, lastRec.off},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl := base.clone(t)
			c.damage(tl)
			l, err := tl.open(t, Options{RecoverFrom: -1, CleanShutdown: true, Trusted: base.end})
			require.NoError(t, err)
			rep := l.Report()
			require.Equal(t, c.wantEnd, rep.End)
			require.Equal(t, base.end-c.wantEnd, rep.LostFlushed)
			checkRecords(t, l, base.recsBefore(c.wantEnd))
			require.NoError(t, l.Close())

			// Trusted at the end that is left: nothing flushed was lost.
			l, err = tl.open(t, Options{RecoverFrom: -1, CleanShutdown: true, Trusted: c.wantEnd})
			require.NoError(t, err)
			require.Zero(t, l.Report().LostFlushed)
			require.NoError(t, l.Close())
		})
	}
}
