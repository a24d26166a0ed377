package promqlite

import "github.com/prometheus/client_golang/prometheus"

// descs are the metric descriptions of one collector; the queue-level
// ones depend on whether queue labels are kept.
type descs struct {
	up, scrapeErrors *prometheus.Desc

	puts, reads, flushes, flushDuration *prometheus.Desc

	logMin, logWrote, logFlushed, logDispatched *prometheus.Desc
	logSize, logUnflushed, dispatchLag          *prometheus.Desc

	diskFull, flowControl             *prometheus.Desc
	diskRatio, diskUsed, diskSize     *prometheus.Desc
	earlySegments, earlyBytes         *prometheus.Desc
	pendingTx                         *prometheus.Desc
	topicMessages, topicQueues, dlq   *prometheus.Desc
	queueMessages, queueMin, queueMax *prometheus.Desc

	groupMembers, groupLag, lag, committed *prometheus.Desc
}

// all lists the descriptions the collector may emit; the queue series
// only with queue labels.
func (d *descs) all() []*prometheus.Desc {
	out := []*prometheus.Desc{d.up, d.scrapeErrors, d.puts, d.reads, d.flushes, d.flushDuration,
		d.logMin, d.logWrote, d.logFlushed, d.logDispatched, d.logSize, d.logUnflushed, d.dispatchLag,
		d.diskFull, d.flowControl, d.diskRatio, d.diskUsed, d.diskSize, d.earlySegments, d.earlyBytes,
		d.pendingTx, d.topicMessages, d.topicQueues, d.dlq, d.groupMembers, d.groupLag, d.lag}
	if d.queueMessages != nil {
		out = append(out, d.queueMessages, d.queueMin, d.queueMax, d.committed)
	}
	return out
}

func newDescs(c *config) *descs {
	n := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("mqlite_"+name, help, labels, c.constLabels)
	}
	d := &descs{
		up:           n("up", "1 if the last scrape read the store, 0 if the store is closed or could not be read."),
		scrapeErrors: n("scrape_errors_total", "Scrapes that failed to read an open store."),

		puts:    n("messages_put_total", "Messages stored since the store was opened."),
		reads:   n("messages_read_total", "Messages read (consumers, ReadQueue, Messages, lookups) since the store was opened."),
		flushes: n("commitlog_flushes_total", "CommitLog flushes (syncs to disk) since the store was opened."),
		flushDuration: n("commitlog_flush_duration_seconds",
			"Duration of the recent (up to 1024) CommitLog flushes: median (p50), 99th percentile (p99) and longest (max).", "stat"),

		logMin:        n("commitlog_min_offset_bytes", "First CommitLog byte still stored (retention moves it)."),
		logWrote:      n("commitlog_write_position_bytes", "End of the last CommitLog record written."),
		logFlushed:    n("commitlog_flushed_position_bytes", "How far the CommitLog is durable."),
		logDispatched: n("commitlog_dispatched_position_bytes", "How far CommitLog records are visible to readers."),
		logSize:       n("commitlog_size_bytes", "CommitLog bytes stored: write position minus first offset."),
		logUnflushed:  n("commitlog_unflushed_bytes", "CommitLog bytes written but not yet durable."),
		dispatchLag:   n("dispatch_lag_bytes", "CommitLog bytes written that readers cannot see yet."),

		diskFull:      n("disk_full", "1 while sends are refused because the volume is fuller than Options.DiskMaxUsedRatio."),
		flowControl:   n("flow_control", "1 while sends are refused by flow control."),
		diskRatio:     n("disk_used_ratio", "Used fraction of the volume holding the store."),
		diskUsed:      n("disk_used_bytes", "Bytes used on the volume holding the store."),
		diskSize:      n("disk_size_bytes", "Bytes usable on the volume holding the store (used plus available)."),
		earlySegments: n("retention_early_deleted_segments_total", "CommitLog segments deleted before their retention age since the store was opened."),
		earlyBytes:    n("retention_early_deleted_bytes_total", "Bytes of the CommitLog segments deleted before their retention age since the store was opened."),
		pendingTx:     n("transactions_pending", "Half messages not yet committed or rolled back."),

		topicMessages: n("topic_messages", "Messages stored in the topic's queues.", "topic", "system"),
		topicQueues:   n("topic_queues", "Queues of the topic.", "topic"),
		dlq:           n("dlq_messages", "Messages stored in the consumer group's dead-letter topic.", "group"),

		groupMembers: n("consumer_group_members", "Live members of the consumer group.", "group"),
		groupLag:     n("consumer_group_lag_messages", "Messages the consumer group has not consumed, over all its queues.", "group"),
	}
	if c.perQueue {
		d.queueMessages = n("queue_messages", "Messages stored in the queue.", "topic", "queue")
		d.queueMin = n("queue_min_offset", "First logical offset still stored in the queue.", "topic", "queue")
		d.queueMax = n("queue_max_offset", "Next logical offset of the queue (one past the newest visible message).", "topic", "queue")
		d.lag = n("consumer_lag_messages", "Messages the consumer group has not consumed from the queue.",
			"group", "topic", "queue", "consumer_instance")
		d.committed = n("consumer_committed_offset", "Committed offset of the consumer group: the next offset it consumes from the queue.",
			"group", "topic", "queue", "consumer_instance")
	} else {
		d.lag = n("consumer_lag_messages", "Messages the consumer group has not consumed from the topic (queue labels dropped).",
			"group", "topic")
	}
	return d
}
