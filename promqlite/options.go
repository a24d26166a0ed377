package promqlite

import (
	"maps"

	"github.com/prometheus/client_golang/prometheus"
)

// Option configures a collector made by NewCollector.
type Option func(*config)

// DiskUsageFunc reports the bytes used and the total size of the volume
// holding a store; see WithDiskUsage.
type DiskUsageFunc func() (used, total uint64, err error)

type config struct {
	perQueue    bool
	diskUsage   DiskUsageFunc
	constLabels prometheus.Labels
}

// WithoutQueueLabels bounds label cardinality on stores with many
// queues: queue-level series lose their queue label and are summed per
// topic (consumer lag per group and topic, summed over queues and
// broadcasting instances), and the per-queue offset series
// (mqlite_queue_min_offset, mqlite_queue_max_offset,
// mqlite_consumer_committed_offset) are not exported.
func WithoutQueueLabels() Option {
	return func(c *config) { c.perQueue = false }
}

// WithDiskUsage sets where the mqlite_disk_* gauges come from. By default
// they report Stats.Disk, the volume holding the store as its disk-ratio
// options see it, and are absent where that is unknown (an in-memory
// store). A nil fn turns
// them off; a fn that fails or reports a total of 0 leaves them out of
// that scrape.
func WithDiskUsage(fn DiskUsageFunc) Option {
	return func(c *config) {
		c.diskUsage = fn
		if fn == nil {
			c.diskUsage = noDiskUsage
		}
	}
}

// WithConstLabels adds labels with fixed values to every series, to tell
// apart several stores exported by one process (for example
// prometheus.Labels{"store": "orders"}). The labels are copied.
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) { c.constLabels = maps.Clone(l) }
}

// noDiskUsage reports nothing: the disk gauges are left out.
func noDiskUsage() (used, total uint64, err error) { return 0, 0, nil }
