package mqlite

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// logCapture is a slog.Handler that keeps the messages of warnings.
type logCapture struct {
	mu    sync.Mutex
	warns []string
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *logCapture) WithGroup(string) slog.Handler            { return c }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		c.mu.Lock()
		c.warns = append(c.warns, r.Message)
		c.mu.Unlock()
	}
	return nil
}

// lossWarnings counts the warnings about segments deleted early.
func (c *logCapture) lossWarnings() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, w := range c.warns {
		if strings.Contains(w, "before their retention age") {
			n++
		}
	}
	return n
}

// statsRecorder is a StatsObserver keeping the snapshots it gets.
type statsRecorder struct {
	mu  sync.Mutex
	got []Stats
}

func (r *statsRecorder) ObserveStats(st Stats) {
	r.mu.Lock()
	r.got = append(r.got, st)
	r.mu.Unlock()
}

func (r *statsRecorder) maxEarly() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, st := range r.got {
		n = max(n, st.Retention.EarlySegments)
	}
	return n
}

const policyMessages = 1200

// openFilled opens a store on mem with small files, o's policy, and
// policyMessages fresh, unconsumed 1 KB messages in queue 0 of "p". The
// fake clock stays put, so the store's own retention pass never runs.
func openFilled(t *testing.T, mem *vfs.MemFS, o Options) *Store {
	t.Helper()
	o.Clock = clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	o.Flush, o.SegmentSize, o.NoWarm = FlushSync, 64<<10, true
	o.ConsumeQueueEntries, o.IndexSlots, o.IndexEntries = 64, 64, 256
	s, err := openFS(mem, "/policy", &o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.CreateTopic("p", TopicConfig{Queues: 1}))
	for range policyMessages {
		_, err := s.Put(context.Background(), &Message{Topic: "p", Body: make([]byte, 1000)}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, s.WaitVisible(context.Background()))
	return s
}

// setUse makes the volume use of mem about ratio, and lets the store
// sample it.
func setUse(s *Store, mem *vfs.MemFS, ratio float64) {
	mem.SetCapacity(0)
	used, _, _ := mem.Usage("/")
	mem.SetCapacity(uint64(float64(used) / ratio))
	s.checkDisk()
}

// With default options, at any disk use, no unconsumed message younger
// than the retention age is deleted (neither by the periodic pass nor by
// CleanExpired), and sends fail with ErrDiskFull only above
// DiskMaxUsedRatio (0.90), with nothing stored.
func TestDiskFullDefaultKeepsUnconsumed(t *testing.T) {
	mem := vfs.NewMem()
	logs := &logCapture{}
	s := openFilled(t, mem, Options{Logger: slog.New(logs)})
	require.Equal(t, DiskFullReject, s.opts.DiskFullPolicy)
	for _, ratio := range []float64{0.5, 0.74, 0.8, 0.86, 0.89, 0.93, 0.99, 0.9999} {
		setUse(s, mem, ratio)
		for _, now := range []bool{false, true} {
			rep, err := s.applyRetention(now)
			require.NoError(t, err)
			require.Zero(t, rep.Segments, "use %.4f, deletion hour %t", ratio, now)
		}
		min, err := s.MinOffset("p", 0)
		require.NoError(t, err)
		max, err := s.MaxOffset("p", 0)
		require.NoError(t, err)
		require.Zero(t, min, "use %.4f", ratio)
		require.GreaterOrEqual(t, max, int64(policyMessages))
		for _, off := range []int64{0, policyMessages / 2, policyMessages - 1} {
			_, err := s.ReadQueue(context.Background(), "p", 0, off, 1)
			require.NoError(t, err, "use %.4f, offset %d", ratio, off)
		}

		before := s.log.WrotePosition()
		_, err = s.Put(context.Background(), &Message{Topic: "p", Body: []byte("x")}, 0)
		if ratio > DefaultDiskMaxUsedRatio {
			require.ErrorIs(t, err, ErrDiskFull, "use %.4f", ratio)
			require.Equal(t, before, s.log.WrotePosition(), "a refused send stores nothing")
		} else {
			require.NoError(t, err, "use %.4f: below the limit sends work", ratio)
		}
	}
	st, err := s.Stats()
	require.NoError(t, err)
	require.Zero(t, st.Retention.EarlySegments)
	require.Zero(t, logs.lossWarnings())
}

// DiskFullDeleteOldest opts in: above ForceCleanRatio the oldest,
// unexpired, unconsumed segments go; each pass that deletes warns, counts
// in Stats.Retention and calls the StatsObserver. Below the ratio nothing
// goes. With no Logger set the warning goes to slog.Default.
func TestDiskFullDeleteOldestWarnsAndCounts(t *testing.T) {
	for _, withLogger := range []bool{true, false} {
		t.Run(map[bool]string{true: "logger", false: "slog.Default"}[withLogger], func(t *testing.T) {
			logs := &logCapture{}
			o := Options{DiskFullPolicy: DiskFullDeleteOldest, DiskMaxUsedRatio: 1, StatsObserver: &statsRecorder{}}
			if withLogger {
				o.Logger = slog.New(logs)
			} else {
				old := slog.Default()
				slog.SetDefault(slog.New(logs))
				t.Cleanup(func() { slog.SetDefault(old) })
			}
			mem := vfs.NewMem()
			s := openFilled(t, mem, o)

			setUse(s, mem, 0.80) // above CleanRatio, below ForceCleanRatio
			rep, err := s.applyRetention(false)
			require.NoError(t, err)
			require.Zero(t, rep.Segments, "below ForceCleanRatio nothing unexpired goes")
			require.Zero(t, logs.lossWarnings())

			setUse(s, mem, 0.95)
			rep, err = s.applyRetention(false)
			require.NoError(t, err)
			require.Positive(t, rep.Segments, "above ForceCleanRatio the oldest go")
			min, err := s.MinOffset("p", 0)
			require.NoError(t, err)
			require.Positive(t, min, "unconsumed messages were deleted")

			st, err := s.Stats()
			require.NoError(t, err)
			require.Equal(t, int64(rep.Segments), st.Retention.EarlySegments)
			require.Equal(t, rep.Bytes, st.Retention.EarlyBytes)
			require.Equal(t, 1, logs.lossWarnings(), "one warning for the pass")
			require.Equal(t, int64(rep.Segments), s.opts.StatsObserver.(*statsRecorder).maxEarly(), "the stats hook was called")
		})
	}
}

// MaxStoreBytes, the other way to delete unexpired segments, warns and
// counts as well, under the default policy.
func TestMaxStoreBytesWarnsAndCounts(t *testing.T) {
	logs := &logCapture{}
	mem := vfs.NewMem()
	s := openFilled(t, mem, Options{Logger: slog.New(logs), MaxStoreBytes: 256 << 10})
	rep, err := s.applyRetention(false)
	require.NoError(t, err)
	require.Positive(t, rep.Segments)
	st, err := s.Stats()
	require.NoError(t, err)
	require.Equal(t, int64(rep.Segments), st.Retention.EarlySegments)
	require.Equal(t, 1, logs.lossWarnings())
}

// Expired segments deleted for space are not counted as early.
func TestExpiredDeletionNotEarly(t *testing.T) {
	logs := &logCapture{}
	mem := vfs.NewMem()
	s := openFilled(t, mem, Options{Logger: slog.New(logs), Retention: time.Minute})
	s.opts.Clock.(*clock.Fake).Set(s.opts.Clock.Now().Add(time.Hour))
	rep, err := s.CleanExpired()
	require.NoError(t, err)
	require.Positive(t, rep.Segments)
	st, err := s.Stats()
	require.NoError(t, err)
	require.Zero(t, st.Retention.EarlySegments)
	require.Zero(t, logs.lossWarnings())
}

func TestDiskFullPolicyOption(t *testing.T) {
	_, err := (&Options{DiskFullPolicy: 7}).withDefaults()
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Equal(t, "DiskFullDeleteOldest", DiskFullDeleteOldest.String())
	require.Equal(t, "DiskFullPolicy(7)", DiskFullPolicy(7).String())
}

// Stats.Disk reports the volume as the disk-ratio options see it, and
// nothing where the file system cannot tell.
func TestStatsDisk(t *testing.T) {
	mem := vfs.NewMem()
	s := openFilled(t, mem, Options{})
	st, err := s.Stats()
	require.NoError(t, err)
	require.Equal(t, DiskStats{}, st.Disk, "no capacity set: unknown")

	setUse(s, mem, 0.8)
	st, err = s.Stats()
	require.NoError(t, err)
	used, total, _ := mem.Usage("/")
	require.Equal(t, DiskStats{Known: true, Used: used, Total: total, Ratio: float64(used) / float64(total)}, st.Disk)
	require.InDelta(t, 0.8, st.Disk.Ratio, 0.01)
}
