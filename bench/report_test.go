package bench

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func row(system, workload string, kind Kind, msgs int64, secs float64) Result {
	j := Job{Kind: kind, System: system, Mode: Async, Size: 128, Producers: 1, Batch: 1, Count: int(msgs)}
	if workload == "sync" {
		j.Mode = Sync
	}
	return Result{Job: j, Msgs: msgs, Bytes: msgs * 128, Seconds: secs, P50: time.Microsecond, P99: time.Millisecond}
}

func TestTableWrite(t *testing.T) {
	tb := &Table{Header: []string{"name", "n"}, Right: []bool{false, true},
		Rows: [][]string{{"a|b", "1"}, {"long name", "12345"}}}
	var b bytes.Buffer
	if err := tb.Write(&b); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"| name      |     n |\n" +
		"| --------- | ----: |\n" +
		"| a\\|b      |     1 |\n" +
		"| long name | 12345 |\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestReportRatiosAndMarkdown(t *testing.T) {
	rep := &Report{Meta: Meta{Preset: "quick", Started: time.Unix(0, 0).UTC()}}
	rep.add(row("mqlite", "", KindProduce, 1000, 1))
	rep.add(row("bbolt", "", KindProduce, 500, 1))
	synced := row("mqlite", "sync", KindProduce, 100, 1)
	synced.Syncs = 8
	synced.GCs = 4321
	rep.add(synced)
	rep.add(row("bbolt", "sync", KindProduce, 300, 1))
	bad := row("wal", "sync", KindProduce, 0, 0)
	bad.Err = "boom"
	rep.add(bad)
	rep.add(Result{Job: Job{Kind: KindLimits}, Limits: []Limit{{Name: "probe", MBPerSec: 10}}})
	r := rep.Ratios()
	if r[0] != 1 || r[1] != 0.5 || r[3] != 3 {
		t.Fatalf("ratios %v", r)
	}
	if _, ok := r[4]; ok {
		t.Fatal("a failed row got a ratio")
	}
	var b bytes.Buffer
	if err := rep.WriteMarkdown(&b, "chart.svg"); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, s := range []string{"# mqbench results (quick run)", "![throughput", "## Machine limits", "| probe",
		"| produce 128B p1 async ", "0.50", "3.00", "; 12.5 msgs per sync", "| 4321 |", "## Failures", "boom"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
	if len(rep.Failed()) != 1 {
		t.Errorf("failed: %v", rep.Failed())
	}
}

func TestWriteChart(t *testing.T) {
	rows := []Result{row("mqlite", "", KindProduce, 1_000_000, 1), row("bbolt", "", KindProduce, 2_000, 1),
		row("mqlite", "sync", KindProduce, 40_000, 1), row("x<&>", "sync", KindProduce, 10, 1),
		row("mqlite", "", KindLatency, 10, 1)}
	var b bytes.Buffer
	if err := WriteChart(&b, rows, "a <title>"); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, b.Bytes())
	svg := b.String()
	if n := strings.Count(svg, "<title>"); n != 4 {
		t.Errorf("%d bars, want 4 (latency rows are not charted)", n)
	}
	for _, s := range []string{"1.00M", "2.0K", "40K", "x&lt;&amp;&gt;", "log scale", ">1K<", ">1M<"} {
		if !strings.Contains(svg, s) {
			t.Errorf("chart lacks %q", s)
		}
	}
	b.Reset()
	if err := WriteChart(&b, nil, "empty"); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, b.Bytes())
}

func TestHistQuantiles(t *testing.T) {
	var h Hist
	if h.Quantile(0.5) != 0 || h.Mean() != 0 {
		t.Fatal("empty histogram")
	}
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Microsecond}, {0.99, 9900 * time.Microsecond}, {1, 10000 * time.Microsecond}} {
		got := h.Quantile(c.q)
		if d := float64(got-c.want) / float64(c.want); d < -0.02 || d > 0.02 {
			t.Errorf("q%g = %s, want %s ±2%%", c.q, got, c.want)
		}
	}
	var o Hist
	o.Record(time.Hour)
	h.Merge(&o)
	if h.Count() != 10001 || h.Quantile(1) != time.Hour {
		t.Errorf("merge: count %d, max %s", h.Count(), h.Quantile(1))
	}
	for v := uint64(0); v < 1<<20; v += 97 {
		if i := histIndex(v); histLow(i) > v || histLow(i+1) <= v {
			t.Fatalf("value %d in bucket %d [%d, %d)", v, i, histLow(i), histLow(i+1))
		}
	}
}

func TestConfigPlanAndFilters(t *testing.T) {
	cfg := QuickConfig()
	all := cfg.Plan()
	if all[0].Kind != KindLimits || all[len(all)-1].Kind != KindRecovery {
		t.Fatalf("plan starts with %s, ends with %s", all[0].Kind, all[len(all)-1].Kind)
	}
	// mqlite has five consume rows per size (push, pull, readqueue and
	// the two decode-floor probes) and two sync latency rows (durable
	// reads, read-uncommitted).
	if want := 1 + len(Systems())*(2*3*2+2+2) + 2*4 + 1 + 1; len(all) != want {
		t.Errorf("%d jobs, want %d", len(all), want)
	}
	var readers []string
	for _, j := range all {
		if j.Kind == KindConsume && j.Size == 128 && j.System == "mqlite" {
			readers = append(readers, j.SystemLabel())
		}
	}
	if want := []string{"mqlite push", "mqlite pull", "mqlite readqueue", "mqlite decode-floor", "mqlite decode-floor-parallel"}; !slices.Equal(readers, want) {
		t.Errorf("mqlite consume rows %q, want %q", readers, want)
	}
	var latency []string
	for _, j := range all {
		if j.Kind == KindLatency && j.System == "mqlite" {
			latency = append(latency, string(j.Mode)+" "+j.SystemLabel())
		}
	}
	if want := []string{"async mqlite", "sync mqlite", "sync mqlite read-uncommitted"}; !slices.Equal(latency, want) {
		t.Errorf("mqlite latency rows %q, want %q", latency, want)
	}
	cfg.Workloads = []string{"consume/pull"}
	if p := cfg.Plan(); len(p) != 2 || p[0].Reader != ReaderPull || p[1].Reader != ReaderPull {
		t.Errorf("consume/pull plans %+v", p)
	}
	cfg.Systems, cfg.Workloads = []string{"bbolt"}, []string{"produce/sync", "consume/4KiB"}
	for _, j := range cfg.Plan() {
		if j.System != "bbolt" || !(j.Kind == KindProduce && j.Mode == Sync || j.Kind == KindConsume && j.Size == 4096) {
			t.Errorf("filtered plan has %s %s", j.Workload(), j.System)
		}
	}
	if n := len(cfg.Plan()); n != 5 {
		t.Errorf("filtered plan has %d jobs, want 5", n)
	}
	cfg.Systems, cfg.Workloads, cfg.Modes = []string{"nope"}, []string{"nothing"}, []Mode{"fast"}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "nope") || !strings.Contains(err.Error(), "nothing") ||
		!strings.Contains(err.Error(), "fast") {
		t.Errorf("validate: %v", err)
	}
}

// TestConsumeRatiosAgainstPush: a consume workload's ratios are against
// mqlite's first row (its push consumer), and each mqlite reader row is
// labelled with its reader.
func TestConsumeRatiosAgainstPush(t *testing.T) {
	rep := &Report{}
	for _, r := range []struct {
		system, reader string
		msgs           int64
	}{{"mqlite", ReaderPush, 100}, {"mqlite", ReaderPull, 200}, {"mqlite", ReaderReadQueue, 400}, {"wal", "", 300}} {
		res := row(r.system, "", KindConsume, r.msgs, 1)
		res.Job.Reader = r.reader
		rep.add(res)
	}
	got := rep.Ratios()
	if got[0] != 1 || got[1] != 2 || got[2] != 4 || got[3] != 3 {
		t.Fatalf("ratios %v, want 1, 2, 4, 3", got)
	}
	tb := rep.ThroughputTable()
	var labels []string
	for _, r := range tb.Rows {
		labels = append(labels, r[1])
	}
	if want := []string{"mqlite push", "mqlite pull", "mqlite readqueue", "wal"}; !slices.Equal(labels, want) {
		t.Fatalf("system column %q, want %q", labels, want)
	}
}
