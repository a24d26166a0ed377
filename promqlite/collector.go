package promqlite

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/topic"
	"github.com/prometheus/client_golang/prometheus"
)

// collector is the prometheus.Collector NewCollector returns.
type collector struct {
	s      *mqlite.Store
	cfg    config
	d      *descs
	errors atomic.Int64 // scrapes that failed on an open store
}

// NewCollector returns a prometheus.Collector exporting s: see the
// package documentation for what a scrape reads and the README for the
// metric list. It is safe for concurrent scrapes and keeps working, with
// mqlite_up 0, after s is closed; a nil s gives a collector whose every
// scrape reports mqlite_up 0 and counts an error. Bad constant labels
// (WithConstLabels) make registering the collector fail with an error.
func NewCollector(s *mqlite.Store, opts ...Option) prometheus.Collector {
	cfg := config{perQueue: true}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return &collector{s: s, cfg: cfg, d: newDescs(&cfg)}
}

// Describe sends the descriptions of every series the collector may
// emit.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d.all() {
		ch <- d
	}
}

// Collect reads the store once and sends its series. A closed or
// unreadable store gives mqlite_up 0 and the error counter only.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.stats()
	if err != nil {
		if !errors.Is(err, mqlite.ErrClosed) {
			c.errors.Add(1)
		}
		ch <- gauge(c.d.up, 0)
		ch <- counter(c.d.scrapeErrors, c.errors.Load())
		return
	}
	ch <- gauge(c.d.up, 1)
	ch <- counter(c.d.scrapeErrors, c.errors.Load())
	c.collectStore(ch, st)
	c.collectDisk(ch, st.Disk)
	c.collectTopics(ch, st.Topics)
	c.collectGroups(ch, st.Groups)
}

// errNilStore is a scrape of a collector made with a nil Store.
var errNilStore = fmt.Errorf("promqlite: nil *mqlite.Store: %w", mqlite.ErrInvalidArgument)

func (c *collector) stats() (mqlite.Stats, error) {
	if c.s == nil {
		return mqlite.Stats{}, errNilStore
	}
	return c.s.Stats()
}

// collectStore sends the store-wide series: totals, CommitLog positions,
// send refusals, retention and transactions.
func (c *collector) collectStore(ch chan<- prometheus.Metric, st mqlite.Stats) {
	d, t, l := c.d, st.Throughput, st.CommitLog
	ch <- counter(d.puts, t.Puts)
	ch <- counter(d.reads, t.Gets)
	ch <- counter(d.flushes, t.Flushes)
	ch <- prometheus.MustNewConstMetric(d.flushDuration, prometheus.GaugeValue, t.FlushP50.Seconds(), "p50")
	ch <- prometheus.MustNewConstMetric(d.flushDuration, prometheus.GaugeValue, t.FlushP99.Seconds(), "p99")
	ch <- prometheus.MustNewConstMetric(d.flushDuration, prometheus.GaugeValue, t.FlushMax.Seconds(), "max")

	ch <- gauge(d.logMin, float64(l.MinOffset))
	ch <- gauge(d.logWrote, float64(l.WrotePosition))
	ch <- gauge(d.logFlushed, float64(l.FlushedPosition))
	ch <- gauge(d.logDispatched, float64(l.DispatchedPosition))
	ch <- gauge(d.logSize, float64(max(l.WrotePosition-l.MinOffset, 0)))
	ch <- gauge(d.logUnflushed, float64(max(l.WrotePosition-l.FlushedPosition, 0)))
	ch <- gauge(d.dispatchLag, float64(l.DispatchLag))

	ch <- gauge(d.diskFull, boolValue(t.DiskFull))
	ch <- gauge(d.flowControl, boolValue(t.FlowControl))
	ch <- counter(d.earlySegments, st.Retention.EarlySegments)
	ch <- counter(d.earlyBytes, st.Retention.EarlyBytes)
	ch <- gauge(d.pendingTx, float64(st.PendingTransactions))
}

// collectDisk sends the volume's use, if it can be read: from
// WithDiskUsage's function if one was given, else from Stats.
func (c *collector) collectDisk(ch chan<- prometheus.Metric, disk mqlite.DiskStats) {
	used, total := disk.Used, disk.Total
	if c.cfg.diskUsage != nil {
		var err error
		if used, total, err = c.cfg.diskUsage(); err != nil {
			return
		}
	}
	if total == 0 {
		return
	}
	ch <- gauge(c.d.diskRatio, float64(used)/float64(total))
	ch <- gauge(c.d.diskUsed, float64(used))
	ch <- gauge(c.d.diskSize, float64(total))
}

// collectTopics sends the topic, DLQ and (with queue labels) queue
// series.
func (c *collector) collectTopics(ch chan<- prometheus.Metric, topics []mqlite.TopicStats) {
	d := c.d
	for _, t := range topics {
		ch <- gauge(d.topicMessages, float64(t.Messages), t.Name, strconv.FormatBool(t.System))
		ch <- gauge(d.topicQueues, float64(len(t.Queues)), t.Name)
		if group, ok := strings.CutPrefix(t.Name, topic.DLQPrefix); ok && t.System {
			ch <- gauge(d.dlq, float64(t.Messages), group)
		}
		if d.queueMessages == nil {
			continue
		}
		for _, q := range t.Queues {
			id := strconv.Itoa(q.ID)
			ch <- gauge(d.queueMessages, float64(q.Messages), t.Name, id)
			ch <- gauge(d.queueMin, float64(q.MinOffset), t.Name, id)
			ch <- gauge(d.queueMax, float64(q.MaxOffset), t.Name, id)
		}
	}
}

// collectGroups sends the consumer groups' members, lag and committed
// offsets.
func (c *collector) collectGroups(ch chan<- prometheus.Metric, groups []mqlite.GroupStats) {
	d := c.d
	members := map[string]int{}
	for _, g := range c.s.ConsumerGroups() {
		members[g.Name] = len(g.Members)
	}
	for _, g := range groups {
		ch <- gauge(d.groupMembers, float64(members[g.Name]), g.Name)
		ch <- gauge(d.groupLag, float64(g.Lag), g.Name)
		if !c.cfg.perQueue {
			c.collectTopicLag(ch, g)
			continue
		}
		for _, q := range g.Queues {
			id := strconv.Itoa(q.ID)
			ch <- gauge(d.lag, float64(q.Lag), g.Name, q.Topic, id, q.Instance)
			if q.Committed >= 0 {
				ch <- gauge(d.committed, float64(q.Committed), g.Name, q.Topic, id, q.Instance)
			}
		}
	}
}

// collectTopicLag sends a group's lag summed per topic, in the order the
// topics first appear.
func (c *collector) collectTopicLag(ch chan<- prometheus.Metric, g mqlite.GroupStats) {
	var order []string
	sum := map[string]int64{}
	for _, q := range g.Queues {
		if _, seen := sum[q.Topic]; !seen {
			order = append(order, q.Topic)
		}
		sum[q.Topic] += q.Lag
	}
	for _, t := range order {
		ch <- gauge(c.d.lag, float64(sum[t]), g.Name, t)
	}
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(d *prometheus.Desc, v int64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
