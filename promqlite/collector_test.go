package promqlite_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/promqlite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

var update = flag.Bool("update", false, "rewrite the golden exposition files in testdata")

// exposition gathers c through a pedantic registry (which also checks
// that every series matches a described, consistent descriptor) and
// returns the text format.
func exposition(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// golden compares c's whole exposition with testdata/name, with
// testutil.CollectAndCompare; -update rewrites the file.
func golden(t *testing.T, c prometheus.Collector, name string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(exposition(t, c)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := testutil.CollectAndCompare(c, f); err != nil {
		t.Fatal(err)
	}
}

func compare(t *testing.T, c prometheus.Collector, want string, names ...string) {
	t.Helper()
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

// TestCollectorPerQueue checks every series of the fixture store with
// queue labels, then the values that matter one family at a time.
func TestCollectorPerQueue(t *testing.T) {
	f := newFixture(t)
	c := promqlite.NewCollector(f.s)
	golden(t, c, "per_queue.prom")

	compare(t, c, `
# HELP mqlite_up 1 if the last scrape read the store, 0 if the store is closed or could not be read.
# TYPE mqlite_up gauge
mqlite_up 1
# HELP mqlite_messages_put_total Messages stored since the store was opened.
# TYPE mqlite_messages_put_total counter
mqlite_messages_put_total 5
# HELP mqlite_dlq_messages Messages stored in the consumer group's dead-letter topic.
# TYPE mqlite_dlq_messages gauge
mqlite_dlq_messages{group="billing"} 1
# HELP mqlite_consumer_lag_messages Messages the consumer group has not consumed from the queue.
# TYPE mqlite_consumer_lag_messages gauge
mqlite_consumer_lag_messages{consumer_instance="",group="billing",queue="0",topic="orders"} 1
mqlite_consumer_lag_messages{consumer_instance="",group="billing",queue="1",topic="orders"} 0
# HELP mqlite_consumer_committed_offset Committed offset of the consumer group: the next offset it consumes from the queue.
# TYPE mqlite_consumer_committed_offset gauge
mqlite_consumer_committed_offset{consumer_instance="",group="billing",queue="0",topic="orders"} 2
mqlite_consumer_committed_offset{consumer_instance="",group="billing",queue="1",topic="orders"} 1
# HELP mqlite_consumer_group_members Live members of the consumer group.
# TYPE mqlite_consumer_group_members gauge
mqlite_consumer_group_members{group="billing"} 1
`, "mqlite_up", "mqlite_messages_put_total", "mqlite_dlq_messages", "mqlite_consumer_lag_messages",
		"mqlite_consumer_committed_offset", "mqlite_consumer_group_members")

	// Nothing is cached: the next scrape sees the commit and the closed
	// member.
	if err := f.c.CommitOffset("orders", 0, 3); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Close(); err != nil {
		t.Fatal(err)
	}
	f.c = nil
	compare(t, c, `
# HELP mqlite_consumer_group_lag_messages Messages the consumer group has not consumed, over all its queues.
# TYPE mqlite_consumer_group_lag_messages gauge
mqlite_consumer_group_lag_messages{group="billing"} 0
# HELP mqlite_consumer_group_members Live members of the consumer group.
# TYPE mqlite_consumer_group_members gauge
mqlite_consumer_group_members{group="billing"} 0
`, "mqlite_consumer_group_lag_messages", "mqlite_consumer_group_members")
}

// TestCollectorWithoutQueueLabels checks the bounded-cardinality
// exposition: no queue label anywhere, lag summed per topic.
func TestCollectorWithoutQueueLabels(t *testing.T) {
	f := newFixture(t)
	c := promqlite.NewCollector(f.s, promqlite.WithoutQueueLabels())
	golden(t, c, "per_topic.prom")
	text := exposition(t, c)
	if strings.Contains(text, `queue="`) {
		t.Fatalf("a queue label is left:\n%s", text)
	}
	compare(t, c, `
# HELP mqlite_consumer_lag_messages Messages the consumer group has not consumed from the topic (queue labels dropped).
# TYPE mqlite_consumer_lag_messages gauge
mqlite_consumer_lag_messages{group="billing",topic="orders"} 1
`, "mqlite_consumer_lag_messages")
	if n := testutil.CollectAndCount(c, "mqlite_queue_messages", "mqlite_consumer_committed_offset"); n != 0 {
		t.Fatalf("%d per-queue series without queue labels, want 0", n)
	}
}

// TestCollectorLint runs promlint (naming, units, _total on counters,
// help text) over everything the collector exports.
func TestCollectorLint(t *testing.T) {
	f := newFixture(t)
	disk := promqlite.WithDiskUsage(func() (uint64, uint64, error) { return 1, 4, nil })
	for name, c := range map[string]prometheus.Collector{
		"per queue": promqlite.NewCollector(f.s, disk),
		"per topic": promqlite.NewCollector(f.s, disk, promqlite.WithoutQueueLabels()),
	} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s: %s", name, p.Metric, p.Text)
		}
		if n := testutil.CollectAndCount(c); n < 30 {
			t.Errorf("%s: linted only %d series", name, n)
		}
	}
}

// TestCollectorBroadcasting: a broadcasting group's progress is per
// instance, under consumer_instance; without queue labels it is summed
// per topic over queues and instances.
func TestCollectorBroadcasting(t *testing.T) {
	f := newFixture(t)
	for _, inst := range []string{"i1", "i2"} {
		bc, err := f.s.NewPullConsumer("audit", mqlite.ConsumerOptions{Model: mqlite.Broadcasting,
			InstanceName: inst, ConsumeFromWhere: mqlite.ConsumeFromFirstOffset})
		if err != nil {
			t.Fatal(err)
		}
		defer bc.Close()
		if err := bc.Assign("orders", nil, 0); err != nil {
			t.Fatal(err)
		}
		if inst == "i1" { // consumes one message of queue 0
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // bounds a failure only
			defer cancel()
			if msgs, err := bc.Poll(ctx, 1); err != nil || len(msgs) != 1 {
				t.Fatalf("Poll: %v, %d messages", err, len(msgs))
			}
			if err := bc.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	lag := "mqlite_consumer_lag_messages"
	compare(t, promqlite.NewCollector(f.s), `
# HELP mqlite_consumer_lag_messages Messages the consumer group has not consumed from the queue.
# TYPE mqlite_consumer_lag_messages gauge
mqlite_consumer_lag_messages{consumer_instance="i1",group="audit",queue="0",topic="orders"} 2
mqlite_consumer_lag_messages{consumer_instance="i2",group="audit",queue="0",topic="orders"} 3
mqlite_consumer_lag_messages{consumer_instance="",group="billing",queue="0",topic="orders"} 1
mqlite_consumer_lag_messages{consumer_instance="",group="billing",queue="1",topic="orders"} 0
# HELP mqlite_consumer_committed_offset Committed offset of the consumer group: the next offset it consumes from the queue.
# TYPE mqlite_consumer_committed_offset gauge
mqlite_consumer_committed_offset{consumer_instance="i1",group="audit",queue="0",topic="orders"} 1
mqlite_consumer_committed_offset{consumer_instance="i2",group="audit",queue="0",topic="orders"} 0
mqlite_consumer_committed_offset{consumer_instance="",group="billing",queue="0",topic="orders"} 2
mqlite_consumer_committed_offset{consumer_instance="",group="billing",queue="1",topic="orders"} 1
# HELP mqlite_consumer_group_members Live members of the consumer group.
# TYPE mqlite_consumer_group_members gauge
mqlite_consumer_group_members{group="audit"} 2
mqlite_consumer_group_members{group="billing"} 1
`, lag, "mqlite_consumer_committed_offset", "mqlite_consumer_group_members")
	compare(t, promqlite.NewCollector(f.s, promqlite.WithoutQueueLabels()), `
# HELP mqlite_consumer_lag_messages Messages the consumer group has not consumed from the topic (queue labels dropped).
# TYPE mqlite_consumer_lag_messages gauge
mqlite_consumer_lag_messages{group="audit",topic="orders"} 5
mqlite_consumer_lag_messages{group="billing",topic="orders"} 1
`, lag)
}
