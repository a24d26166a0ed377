package promqlite_test

import (
	"strings"
	"sync"
	"testing"

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
