package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/leakcheck"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	time.Local = time.UTC // golden files hold times
	leakcheck.Main(m)
}

// t0 is the fixture's clock at its first message.
var t0 = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a store built by the test, closed, for the tool to open.
type fixture struct {
	dir  string
	opts mqlite.Options
	ids  []string           // IDs of the orders messages, in send order
	puts []mqlite.PutResult // the orders messages, in send order
	bin  *mqlite.MessageExt // the binary audit message
	args []string           // global flags put before every command (run)
}

// newFixture builds the store the golden files describe: topic "orders"
// (4 queues) with 10 messages (tags, keys, properties, one second apart on
// a fake clock), topic "audit" (1 queue) with two text messages and a
// binary one, and group "billing" that polled orders queue 0 with a pull
// consumer and committed offset 2 of its 3 messages.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	clk := clock.NewFake(t0)
	f := &fixture{dir: filepath.Join(t.TempDir(), "store"),
		opts: mqlite.Options{SegmentSize: 64 << 10, NoWarm: true, Clock: clk, ConsumeQueueEntries: 1000, IndexSlots: 64, IndexEntries: 256}}
	s, err := mqlite.Open(f.dir, &f.opts)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("orders", mqlite.TopicConfig{Queues: 4}))
	require.NoError(t, s.CreateTopic("audit", mqlite.TopicConfig{Queues: 1}))
	for i := range 10 {
		m := &mqlite.Message{Topic: "orders", Tags: []string{"created", "paid"}[i%2],
			Keys: []string{fmt.Sprintf("order-%d", i/2)}, Properties: map[string]string{"amount": fmt.Sprint(100 * i)},
			Body: []byte(fmt.Sprintf(`{"order":%d,"seq":%d}`, i/2, i)), UniqKey: fmt.Sprintf("UNIQ-%04d", i), BornTimestamp: t0}
		r, err := s.Put(ctx, m, i%4)
		require.NoError(t, err)
		f.puts = append(f.puts, r)
		f.ids = append(f.ids, r.MsgID())
		clk.Advance(time.Second)
	}
	for i, body := range [][]byte{[]byte("login alice"), {0, 1, 2, 0xff, 'x', 0x80, 7}, []byte("logout alice")} {
		r, err := s.Put(ctx, &mqlite.Message{Topic: "audit", Body: body, UniqKey: fmt.Sprintf("AUDIT-%d", i), BornTimestamp: t0}, 0)
		require.NoError(t, err)
		if i == 1 {
			f.bin, err = s.MessageByID(r.MsgID())
			require.NoError(t, err)
		}
	}
	require.NoError(t, s.WaitVisible(ctx))
	pc, err := s.NewPullConsumer("billing", mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Assign("orders", nil, 0))
	pctx, cancel := context.WithTimeout(ctx, time.Minute) // a failure bound, not synchronisation
	defer cancel()
	for got := 0; got < 3; {
		msgs, err := pc.Poll(pctx, 3)
		require.NoError(t, err)
		got += len(msgs)
	}
	require.NoError(t, pc.CommitOffset("orders", 0, 2))
	require.NoError(t, pc.Close())
	return f
}

// run runs the tool in-process with -dir f.dir and f.args before args.
func (f *fixture) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runTool(t, append(append([]string{"-dir", f.dir}, f.args...), args...)...)
}

// readOnlyModes runs fn on the fixture as the tool sees it read-only:
// with -readonly while no process holds it, and while a Store of this
// process holds it (the tool then falls back to read-only and says so on
// stderr, which note says what fn should strip from stderr).
func readOnlyModes(t *testing.T, fn func(t *testing.T, f *fixture, note string)) {
	t.Run("flag", func(t *testing.T) {
		f := newFixture(t)
		f.args = []string{"-readonly"}
		fn(t, f, "")
	})
	t.Run("locked", func(t *testing.T) {
		f := newFixture(t)
		s, err := mqlite.Open(f.dir, &f.opts)
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		fn(t, f, f.dir+" is in use by another process; reading it read-only")
	})
}

// checkNote checks that stderr is empty but for the read-only note.
func checkNote(t *testing.T, stderr, note string) {
	t.Helper()
	if note == "" {
		require.Empty(t, stderr)
		return
	}
	require.Contains(t, stderr, note)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "only the note: %s", stderr)
}

// runTool runs the tool in-process and returns its output and exit status.
func runTool(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// golden compares got, with the fixture directory masked, with
// testdata/name.golden (rewritten with -update).
func (f *fixture) golden(t *testing.T, name, got string) {
	t.Helper()
	got = strings.ReplaceAll(got, f.dir, "<DIR>")
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	require.Equal(t, string(want), got, "golden file %s (go test -update rewrites it)", path)
}

// goldenCases are the commands the golden files describe.
func goldenCases(f *fixture) []struct {
	name string
	args []string
} {
	return []struct {
		name string
		args []string
	}{
		{"topics", []string{"topics"}},
		{"stats", []string{"stats"}},
		{"consumers", []string{"consumers"}},
		{"get", []string{"get", f.ids[3]}},
		{"get-binary", []string{"get", f.bin.MsgID}},
		{"query", []string{"query", "-topic", "orders", "-key", "order-2"}},
		{"print-queue", []string{"print", "-topic", "orders", "-queue", "1"}},
		{"print-time", []string{"print", "-topic", "orders", "-time", t0.Add(5 * time.Second).Format(time.RFC3339), "-n", "1"}},
		{"print-full", []string{"print", "-topic", "audit", "-offset", "1", "-n", "1", "-full"}},
		{"tail", []string{"tail", "-topic", "orders", "-n", "1"}},
		{"verify", []string{"verify"}},
	}
}

func TestGolden(t *testing.T) {
	f := newFixture(t)
	for _, tc := range goldenCases(f) {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := f.run(t, tc.args...)
			require.Equal(t, 0, code, "stderr: %s", errOut)
			require.Empty(t, errOut)
			f.golden(t, tc.name, out)
		})
	}
}

// Read-only, every command prints what it prints on the stopped store
// (the same golden files), and the store is not changed.
func TestGoldenReadOnly(t *testing.T) {
	readOnlyModes(t, func(t *testing.T, f *fixture, note string) {
		before := dirState(t, f.dir)
		for _, tc := range goldenCases(f) {
			t.Run(tc.name, func(t *testing.T) {
				out, errOut, code := f.run(t, tc.args...)
				require.Equal(t, 0, code, "stderr: %s", errOut)
				checkNote(t, errOut, note)
				f.golden(t, tc.name, out)
			})
		}
		if note == "" {
			require.Equal(t, before, dirState(t, f.dir), "-readonly changed the store")
		}
	})
}

// dirState lists every file under dir with its size, time and contents.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = fmt.Sprintf("%d %d %x", fi.Size(), fi.ModTime().UnixNano(), sha256.Sum256(b))
		return err
	}))
	return out
}
