package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
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

// run runs the tool in-process with -dir f.dir before args.
func (f *fixture) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runTool(t, append([]string{"-dir", f.dir}, args...)...)
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

func TestGolden(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"topics", []string{"topics"}, 0},
		{"stats", []string{"stats"}, 0},
		{"consumers", []string{"consumers"}, 0},
		{"get", []string{"get", f.ids[3]}, 0},
		{"get-binary", []string{"get", f.bin.MsgID}, 0},
		{"query", []string{"query", "-topic", "orders", "-key", "order-2"}, 0},
		{"print-queue", []string{"print", "-topic", "orders", "-queue", "1"}, 0},
		{"print-time", []string{"print", "-topic", "orders", "-time", t0.Add(5 * time.Second).Format(time.RFC3339), "-n", "1"}, 0},
		{"print-full", []string{"print", "-topic", "audit", "-offset", "1", "-n", "1", "-full"}, 0},
		{"tail", []string{"tail", "-topic", "orders", "-n", "1"}, 0},
		{"verify", []string{"verify"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := f.run(t, tc.args...)
			require.Equal(t, tc.code, code, "stderr: %s", errOut)
			require.Empty(t, errOut)
			f.golden(t, tc.name, out)
		})
	}
}
