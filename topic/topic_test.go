package topic

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/internal/leakcheck"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func open(t *testing.T, fs vfs.FS) *Registry {
	t.Helper()
	r, err := Open(fs, "/s/config", func() time.Time { return t0 })
	require.NoError(t, err)
	return r
}

func TestRegistrySurvivesReopen(t *testing.T) {
	fs := vfs.NewMem()
	r := open(t, fs)
	require.NoError(t, r.Create("orders", Config{Queues: 8}))
	require.NoError(t, r.Create("audit", Config{Queues: 1}))
	n, err := r.Ensure(RetryTopic("billing"), Config{Queues: 1}, true)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, r.Update("orders", Config{Queues: 12}))
	require.NoError(t, r.Create("gone", Config{Queues: 2}))
	require.NoError(t, r.Delete("gone"))

	r2 := open(t, fs)
	require.Equal(t, []Info{
		{Name: "%RETRY%billing", Config: Config{Queues: 1}, System: true, Created: time.UnixMilli(t0.UnixMilli())},
		{Name: "audit", Config: Config{Queues: 1}, Created: time.UnixMilli(t0.UnixMilli())},
		{Name: "orders", Config: Config{Queues: 12}, Created: time.UnixMilli(t0.UnixMilli())},
	}, r2.Topics())
	_, err = r2.Get("gone")
	require.ErrorIs(t, err, errs.ErrTopicNotFound)
	c, err := r2.Get("orders")
	require.NoError(t, err)
	require.Equal(t, 12, c.Queues)
}

func TestRegistryRefusesBadInput(t *testing.T) {
	fs := vfs.NewMem()
	r := open(t, fs)
	require.NoError(t, r.Create("orders", Config{Queues: 4}))
	before, err := vfs.ReadFile(fs, "/s/config/"+File)
	require.NoError(t, err)
	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"empty name", func() error { return r.Create("", Config{Queues: 1}) }, message.ErrInvalidTopic},
		{"space", func() error { return r.Create("a b", Config{Queues: 1}) }, message.ErrInvalidTopic},
		{"dot", func() error { return r.Create("a.b", Config{Queues: 1}) }, message.ErrInvalidTopic},
		{"too long", func() error { return r.Create(strings.Repeat("a", 128), Config{Queues: 1}) }, message.ErrInvalidTopic},
		{"schedule", func() error { return r.Create(Schedule, Config{Queues: 1}) }, message.ErrInvalidTopic},
		{"half", func() error { return r.Create(Half, Config{Queues: 1}) }, message.ErrInvalidTopic},
		{"op", func() error { return r.Create(OpHalf, Config{Queues: 1}) }, message.ErrInvalidTopic},
		{"retry", func() error { return r.Create(RetryTopic("g"), Config{Queues: 1}) }, message.ErrInvalidTopic},
		{"dlq", func() error { return r.Create(DLQTopic("g"), Config{Queues: 1}) }, message.ErrInvalidTopic},
		{"rmq_sys_", func() error { return r.Create("rmq_sys_x", Config{Queues: 1}) }, message.ErrInvalidTopic},
		{"TBW102", func() error { return r.Create("TBW102", Config{Queues: 1}) }, message.ErrInvalidTopic},
		{"zero queues", func() error { return r.Create("x", Config{Queues: 0}) }, errs.ErrInvalidArgument},
		{"too many queues", func() error { return r.Create("x", Config{Queues: MaxQueues + 1}) }, errs.ErrInvalidArgument},
		{"exists", func() error { return r.Create("orders", Config{Queues: 4}) }, errs.ErrTopicExists},
		{"shrink", func() error { return r.Update("orders", Config{Queues: 3}) }, errs.ErrInvalidArgument},
		{"update unknown", func() error { return r.Update("nope", Config{Queues: 3}) }, errs.ErrTopicNotFound},
		{"delete unknown", func() error { return r.Delete("nope") }, errs.ErrTopicNotFound},
		{"user ensure of system name", func() error { _, err := r.Ensure(Half, Config{Queues: 1}, false); return err }, message.ErrInvalidTopic},
		{"system ensure of user name", func() error { _, err := r.Ensure("plain", Config{Queues: 1}, true); return err }, errs.ErrInvalidArgument},
	}
	for _, c := range cases {
		err := c.do()
		require.ErrorIs(t, err, c.want, c.name)
	}
	after, err := vfs.ReadFile(fs, "/s/config/"+File)
	require.NoError(t, err)
	require.Equal(t, before, after, "nothing written")
	require.Len(t, r.Topics(), 1)
}

func TestSystemTopicsAreProtected(t *testing.T) {
	r := open(t, vfs.NewMem())
	_, err := r.Ensure(DLQTopic("g"), Config{Queues: 1}, true)
	require.NoError(t, err)
	require.ErrorIs(t, r.Delete(DLQTopic("g")), errs.ErrInvalidArgument)
	require.ErrorIs(t, r.Update(DLQTopic("g"), Config{Queues: 2}), errs.ErrInvalidArgument)
	n, err := r.Ensure(DLQTopic("g"), Config{Queues: 7}, true)
	require.NoError(t, err)
	require.Equal(t, 1, n, "Ensure keeps an existing topic")
}

func TestDamagedRegistryIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	r := open(t, fs)
	require.NoError(t, r.Create("orders", Config{Queues: 4}))
	good, err := vfs.ReadFile(fs, "/s/config/"+File)
	require.NoError(t, err)
	write := func(b []byte) {
		f, err := fs.OpenFile("/s/config/"+File, os.O_RDWR|os.O_TRUNC, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(b, 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	mutate := map[string]func([]byte) []byte{
		"flipped body bit": func(b []byte) []byte { b[len(b)-3] ^= 1; return b },
		"newer version":    func(b []byte) []byte { b[4] = fileVersion2 + 1; return b },
		"other magic":      func(b []byte) []byte { b[0] = 'X'; return b },
		"truncated":        func(b []byte) []byte { return b[:len(b)-1] },
		"short header":     func(b []byte) []byte { return b[:7] },
	}
	for name, fn := range mutate {
		write(fn(append([]byte(nil), good...)))
		_, err := Open(fs, "/s/config", time.Now)
		require.ErrorIs(t, err, errs.ErrCorrupt, name)
		var ce *errs.CorruptError
		require.True(t, errors.As(err, &ce), name)
		require.Contains(t, ce.Path, File, name)
	}
}

// Version 2 carries topic retentions; a file without any stays version 1,
// which older builds read; a version 1 file naming retentions is refused.
func TestRetentionBumpsTheVersion(t *testing.T) {
	fs := vfs.NewMem()
	r := open(t, fs)
	require.NoError(t, r.Create("plain", Config{Queues: 2}))
	b, err := vfs.ReadFile(fs, "/s/config/"+File)
	require.NoError(t, err)
	require.Equal(t, byte(fileVersion), b[4])

	c := Config{Queues: 2, RetentionAge: time.Hour, RetentionBytes: 1 << 20}
	require.NoError(t, r.Create("short", c))
	b, err = vfs.ReadFile(fs, "/s/config/"+File)
	require.NoError(t, err)
	require.Equal(t, byte(fileVersion2), b[4])
	r2, err := Open(fs, "/s/config", time.Now)
	require.NoError(t, err)
	got, err := r2.Get("short")
	require.NoError(t, err)
	require.Equal(t, c, got)
	age, bytes := r2.Retention("short")
	require.Equal(t, time.Hour, age)
	require.Equal(t, int64(1<<20), bytes)

	// The same body labelled version 1: refused, not read without its retentions.
	old, err := cfgfile.Encode(fileMagic, fileVersion, map[string]record{"short": {Queues: 2, RetentionMs: 1000}})
	require.NoError(t, err)
	require.NoError(t, vfs.WriteFileAtomic(fs, "/s/config", File, old))
	_, err = Open(fs, "/s/config", time.Now)
	require.ErrorIs(t, err, errs.ErrCorrupt)

	require.ErrorIs(t, r2.Create("bad", Config{Queues: 1, RetentionAge: -time.Second}), errs.ErrInvalidArgument)
	require.ErrorIs(t, r2.Create("bad", Config{Queues: 1, RetentionBytes: -1}), errs.ErrInvalidArgument)
	require.ErrorIs(t, r2.Update("short", Config{Queues: 2, RetentionAge: time.Microsecond}), errs.ErrInvalidArgument)
	require.NoError(t, r2.Update("short", Config{Queues: 2}))
	b, err = vfs.ReadFile(fs, "/s/config/"+File)
	require.NoError(t, err)
	require.Equal(t, byte(fileVersion), b[4], "back to version 1 once no topic has a retention")
}
