package promqlite_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/promqlite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

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
