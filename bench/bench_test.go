package bench

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the benchmark child, so the
// harness test below runs every job through a real child process.
func TestMain(m *testing.M) {
	RunChildIfRequested()
	os.Exit(m.Run())
}

// tinyConfig is quick mode shrunk further: every system, every kind of
// workload, a few hundred messages.
func tinyConfig(t *testing.T) Config {
	return Config{
		Quick:     true,
		Sizes:     []SizeCount{{128, 300}, {4096, 50}},
		Producers: []int{3},
		Modes:     []Mode{Async, Batch, Sync},
		Batch:     100,
		RowLimit:  300 * time.Millisecond,
		Latency: []LatencySpec{{Async, 128, 1000, 100 * time.Millisecond},
			{Sync, 128, 200, 100 * time.Millisecond}},
		SegmentSize:   4 << 20,
		RecoveryBytes: 2 << 20,
		Lookups:       20,
		ProbeBytes:    1 << 20,
		WriteBytes:    2 << 20,
		FsyncOps:      10,
		TempDir:       t.TempDir(),
	}
}

// TestRunEverySystem runs the whole harness at a tiny size so that it
// cannot rot: every row must succeed and count its messages.
func TestRunEverySystem(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns ~50 child processes")
	}
	cfg := tinyConfig(t)
	var progress bytes.Buffer
	rep, err := Run(context.Background(), cfg, &progress)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + progress.String())
	for _, r := range rep.Failed() {
		t.Errorf("%s %s: %s", r.Job.Workload(), r.Job.System, r.Err)
	}
	want := len(cfg.Plan())
	got := len(rep.Rows)
	if len(rep.Limits) > 0 {
		got++
	}
	if rep.Recovery != nil {
		got++
	}
	if got != want {
		t.Errorf("%d results for %d jobs", got, want)
	}
	if n := strings.Count(progress.String(), "\n"); n != want {
		t.Errorf("%d progress lines for %d jobs", n, want)
	}
	for _, r := range rep.Rows {
		if r.Err == "" && (r.Msgs <= 0 || r.Seconds <= 0 || r.PeakRSS <= 0) {
			t.Errorf("%s %s: msgs %d, seconds %g, peak RSS %d", r.Job.Workload(), r.Job.System, r.Msgs, r.Seconds, r.PeakRSS)
		}
		if r.Job.Kind == KindLatency && r.P50 <= 0 {
			t.Errorf("%s %s: no latency", r.Job.Workload(), r.Job.System)
		}
	}
	if rr := rep.Recovery; rr == nil || rr.Recovery.Messages == 0 || rr.Recovery.Hits != cfg.Lookups {
		t.Errorf("recovery: %+v", rr)
	}
	var md, svg bytes.Buffer
	if err := rep.WriteMarkdown(&md, "chart.svg"); err != nil {
		t.Fatal(err)
	}
	for _, s := range SystemNames() {
		if !strings.Contains(md.String(), "| "+s) {
			t.Errorf("markdown has no row for %s", s)
		}
	}
	if err := WriteChart(&svg, rep.Rows, "test"); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, svg.Bytes())
}

// TestMqliteReaders checks mqlite's push and pull consumer adapters: every
// body comes back intact (the push consumer's in arrival order), and the
// push consumer's Count counts messages and bytes.
func TestMqliteReaders(t *testing.T) {
	for _, reader := range []string{ReaderPush, ReaderPull} {
		t.Run(reader, func(t *testing.T) {
			p := Params{Dir: t.TempDir(), Producers: 1, Batch: 1, SegmentSize: 1 << 20, Reader: reader}
			q, err := mqliteSystem{}.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			want := map[string]bool{}
			for i := range 100 {
				b := fmt.Appendf(nil, "message %d", i)
				want[string(b)] = true
				if err := q.Send(0, [][]byte{b}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := q.NewConsumer()
			if err != nil {
				t.Fatal(err)
			}
			var got [][]byte
			for len(got) < len(want) {
				if got, err = c.Next(ctx, got); err != nil {
					t.Fatalf("after %d: %v", len(got), err)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d bodies, want %d", len(got), len(want))
			}
			for _, b := range got {
				if !want[string(b)] {
					t.Fatalf("unexpected or repeated body %q", b)
				}
				delete(want, string(b))
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if reader != ReaderPush {
				return
			}
			// A new push consumer of the same group starts after the
			// committed offsets: send 10 more and count them.
			if c, err = q.NewConsumer(); err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for i := range 10 {
				if err := q.Send(0, [][]byte{fmt.Appendf(nil, "m%d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			msgs, bytes, err := c.(Counter).Count(ctx, 10)
			if err != nil || msgs != 10 || bytes != 20 {
				t.Fatalf("Count: %d msgs, %d bytes, %v; want 10, 20", msgs, bytes, err)
			}
		})
	}
}

// TestSystemsRoundTrip checks each adapter in this process: bodies come
// back in order and intact, before and after a reopen.
func TestSystemsRoundTrip(t *testing.T) {
	for _, sys := range Systems() {
		t.Run(sys.Name(), func(t *testing.T) {
			p := Params{Dir: t.TempDir(), Producers: 1, Batch: 4, SegmentSize: 1 << 20}
			q, err := sys.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			var want [][]byte
			for i := range 3 {
				var batch [][]byte
				for k := range 1 + i {
					batch = append(batch, fmt.Appendf(nil, "message %d.%d", i, k))
				}
				if err := q.Send(0, batch); err != nil {
					t.Fatal(err)
				}
				want = append(want, batch...)
			}
			check := func(q Queue) {
				t.Helper()
				c, err := q.NewConsumer()
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var got [][]byte
				for len(got) < len(want) {
					if got, err = c.Next(ctx, got); err != nil {
						t.Fatalf("after %d: %v", len(got), err)
					}
				}
				for i := range want {
					if !bytes.Equal(got[i], want[i]) {
						t.Fatalf("message %d: %q, want %q", i, got[i], want[i])
					}
				}
			}
			check(q)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if q, err = sys.Open(p); err != nil {
				t.Fatal(err)
			}
			check(q)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func checkSVG(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("chart is not well-formed XML: %v\n%s", err, b)
			}
			return
		}
	}
}

// TestCoreHandoff: the core-to-core probe completes its round trips and
// reports a rate and quantiles that agree, or says it was skipped.
func TestCoreHandoff(t *testing.T) {
	l, err := coreHandoff(2000)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOMAXPROCS(0) < 2 || runtime.NumCPU() < 2 {
		if l.Note != "skipped: needs two processors" || l.OpsPerSec != 0 {
			t.Fatalf("one processor: got %+v, want the skip note", l)
		}
		return
	}
	if l.OpsPerSec <= 0 || l.P50 <= 0 || l.P99 < l.P50 {
		t.Fatalf("got %+v: want a rate and 0 < P50 <= P99", l)
	}
	if !strings.Contains(l.Note, "2000 round trips") {
		t.Fatalf("note %q does not say the round trips", l.Note)
	}
}

// TestDecodeFloors: both decode-floor probes count exactly the messages
// asked for and their body bytes, over a queue of known bodies (the
// parallel one splitting the count over its goroutines, an odd count
// included).
func TestDecodeFloors(t *testing.T) {
	for _, reader := range []string{ReaderDecodeFloor, ReaderDecodeFloorParallel} {
		t.Run(reader, func(t *testing.T) {
			dir := t.TempDir()
			q, err := mqliteSystem{}.Open(Params{Dir: dir, Producers: 1, Batch: 1, SegmentSize: 1 << 20, Reader: reader})
			if err != nil {
				t.Fatal(err)
			}
			for range 10 {
				if err := q.Send(0, [][]byte{[]byte("twelve bytes")}); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			// The records are loaded when the store opens with a backlog.
			if q, err = (mqliteSystem{}).Open(Params{Dir: dir, Producers: 1, Batch: 1, SegmentSize: 1 << 20, Reader: reader}); err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			c, err := q.NewConsumer()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, n := range []int64{1, 7, 25} {
				msgs, bytes, err := c.(Counter).Count(context.Background(), n)
				if err != nil || msgs != n || bytes != 12*n {
					t.Fatalf("Count(%d): %d msgs, %d bytes, %v; want %d, %d", n, msgs, bytes, err, n, 12*n)
				}
			}
		})
	}
}

// TestConsumeRowInTwoProcesses: a consume row's backlog is written by one
// child and read by another. The reader refuses a directory with no
// complete backlog (so a runner that skipped the writer fails instead of
// timing an empty store), a writer's failure is the row's error, and the
// two children together read back every message.
func TestConsumeRowInTwoProcesses(t *testing.T) {
	job := Job{Kind: KindConsume, System: "mqlite", Mode: Async, Size: 64, Count: 500, Producers: 1,
		Batch: 100, SegmentSize: 1 << 20, Reader: ReaderPull}

	alone := job
	alone.Dir = t.TempDir()
	if r := Execute(alone); !strings.Contains(r.Err, "no backlog written") {
		t.Fatalf("reader without a writer: err %q, want no backlog written", r.Err)
	}

	bad := job
	bad.System = "nosuch"
	if r := runConsumeJob(context.Background(), t.TempDir(), bad); !strings.HasPrefix(r.Err, "backlog writer: ") {
		t.Fatalf("failing writer: err %q, want the writer's error", r.Err)
	}

	r := runConsumeJob(context.Background(), t.TempDir(), job)
	if r.Err != "" || r.Msgs != 500 || r.Bytes != 500*64 {
		t.Fatalf("consume row: %d msgs, %d bytes, err %q; want 500, %d", r.Msgs, r.Bytes, r.Err, 500*64)
	}
	if !strings.Contains(r.Durability, "reopened in a new process") {
		t.Fatalf("durability %q does not say the reader is a new process", r.Durability)
	}
}
