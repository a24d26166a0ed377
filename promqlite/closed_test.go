package promqlite_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/promqlite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const downText = `
# HELP mqlite_up 1 if the last scrape read the store, 0 if the store is closed or could not be read.
# TYPE mqlite_up gauge
mqlite_up 0
# HELP mqlite_scrape_errors_total Scrapes that failed to read an open store.
# TYPE mqlite_scrape_errors_total counter
mqlite_scrape_errors_total %d
`

// TestCollectorClosedStore: a closed store exports mqlite_up 0 and the
// error counter, nothing else, and being closed is not a scrape error.
func TestCollectorClosedStore(t *testing.T) {
	f := newFixture(t)
	c := promqlite.NewCollector(f.s)
	if n := testutil.CollectAndCount(c); n < 30 {
		t.Fatalf("%d series while open", n)
	}
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	f.c = nil
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		compare(t, c, strings.Replace(downText, "%d", "0", 1)) // all families: nothing else
	}
}

// TestCollectorNilStore: a collector of a nil Store never panics; each
// scrape counts as an error.
func TestCollectorNilStore(t *testing.T) {
	c := promqlite.NewCollector(nil, nil, promqlite.WithoutQueueLabels())
	compare(t, c, strings.Replace(downText, "%d", "1", 1))
	compare(t, c, strings.Replace(downText, "%d", "2", 1))
}

// TestCollectorScrapeWhileClosing scrapes from several goroutines while
// the store closes (run it with -race): every scrape either reads the
// store or reports it down, and none panics.
func TestCollectorScrapeWhileClosing(t *testing.T) {
	f := newFixture(t)
	c := promqlite.NewCollector(f.s)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4*20)
	for range 4 {
		wg.Go(func() {
			<-start
			for range 20 {
				if _, err := reg.Gather(); err != nil {
					errs <- err
				}
			}
		})
	}
	close(start)
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	f.c = nil
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A scrape that raced Close may have counted an error; after it only
	// the two down series remain.
	compare(t, c, `
# HELP mqlite_up 1 if the last scrape read the store, 0 if the store is closed or could not be read.
# TYPE mqlite_up gauge
mqlite_up 0
`, "mqlite_up")
	if n := testutil.CollectAndCount(c); n != 2 {
		t.Fatalf("%d series from a closed store, want 2", n)
	}
}

// TestCollectorDiskUsage: the disk gauges come from WithDiskUsage, are
// left out when it fails or is nil, and are absent by default for an
// in-memory store.
func TestCollectorDiskUsage(t *testing.T) {
	f := newFixture(t)
	names := []string{"mqlite_disk_used_ratio", "mqlite_disk_used_bytes", "mqlite_disk_size_bytes"}
	c := promqlite.NewCollector(f.s, promqlite.WithDiskUsage(func() (uint64, uint64, error) { return 250, 1000, nil }))
	compare(t, c, `
# HELP mqlite_disk_used_ratio Used fraction of the volume holding the store.
# TYPE mqlite_disk_used_ratio gauge
mqlite_disk_used_ratio 0.25
# HELP mqlite_disk_used_bytes Bytes used on the volume holding the store.
# TYPE mqlite_disk_used_bytes gauge
mqlite_disk_used_bytes 250
# HELP mqlite_disk_size_bytes Bytes usable on the volume holding the store (used plus available).
# TYPE mqlite_disk_size_bytes gauge
mqlite_disk_size_bytes 1000
`, names...)
	for name, opt := range map[string]promqlite.Option{
		"failing": promqlite.WithDiskUsage(func() (uint64, uint64, error) { return 0, 0, errors.New("statfs: boom") }),
		"no size": promqlite.WithDiskUsage(func() (uint64, uint64, error) { return 5, 0, nil }),
		"nil":     promqlite.WithDiskUsage(nil),
		"default": nil, // the in-memory store has no volume
	} {
		if n := testutil.CollectAndCount(promqlite.NewCollector(f.s, opt), names...); n != 0 {
			t.Errorf("%s: %d disk series, want 0", name, n)
		}
		if n := testutil.CollectAndCount(promqlite.NewCollector(f.s, opt), "mqlite_up"); n != 1 {
			t.Errorf("%s: %d mqlite_up series, want 1", name, n)
		}
	}
}

// TestCollectorFileStore: on a store with files, flushes are counted
// (FlushSync flushes before Put returns) and the disk gauges report the
// volume by default.
func TestCollectorFileStore(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s, err := mqlite.Open(t.TempDir(), &mqlite.Options{Flush: mqlite.FlushSync, Clock: clk, SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for range 3 {
		if _, err := s.Put(ctx, &mqlite.Message{Topic: "audit", Body: []byte("entry")}, 0); err != nil {
			t.Fatal(err)
		}
	}
	c := promqlite.NewCollector(s, promqlite.WithConstLabels(prometheus.Labels{"store": "audit"}))
	got := map[string]float64{}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["store"] != "audit" {
				t.Errorf("%s: labels %v lack store=audit", mf.GetName(), labels)
			}
			key := mf.GetName()
			if stat, ok := labels["stat"]; ok {
				key += "/" + stat
			}
			got[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	if got["mqlite_commitlog_flushes_total"] < 1 {
		t.Errorf("flushes_total %v, want at least 1", got["mqlite_commitlog_flushes_total"])
	}
	if w, fl := got["mqlite_commitlog_write_position_bytes"], got["mqlite_commitlog_flushed_position_bytes"]; w <= 0 || fl != w {
		t.Errorf("write position %v, flushed %v: want equal and positive under FlushSync", w, fl)
	}
	if p50, mx := got["mqlite_commitlog_flush_duration_seconds/p50"], got["mqlite_commitlog_flush_duration_seconds/max"]; p50 < 0 || p50 > mx {
		t.Errorf("flush p50 %v, max %v", p50, mx)
	}
	if r := got["mqlite_disk_used_ratio"]; r <= 0 || r > 1 {
		t.Errorf("disk_used_ratio %v, want in (0, 1]", r)
	}
	if got["mqlite_disk_size_bytes"] < got["mqlite_disk_used_bytes"] {
		t.Errorf("disk size %v below used %v", got["mqlite_disk_size_bytes"], got["mqlite_disk_used_bytes"])
	}
}

// TestCollectorBadConstLabels: invalid constant labels, or one that
// clashes with a variable label, make Register fail, not a scrape panic.
func TestCollectorBadConstLabels(t *testing.T) {
	f := newFixture(t)
	for _, l := range []prometheus.Labels{{"__reserved": "x"}, {"topic": "x"}, {"group": "x"}} {
		err := prometheus.NewPedanticRegistry().Register(promqlite.NewCollector(f.s, promqlite.WithConstLabels(l)))
		if err == nil {
			t.Errorf("const labels %v: registered, want an error", l)
		}
	}
}
