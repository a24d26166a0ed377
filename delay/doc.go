// Package delay owns the store's two delay services: the delay-level
// scheduler (RocketMQ's ScheduleMessageService: a message with DelayLevel n
// waits in the schedule topic's queue n-1 until its level's delay has
// passed since it was stored) and the timer wheel (RocketMQ 5 timer
// messages: a message with a deliver-at time waits in the timer topic, and
// the wheel files it in a bucket file per minute of due times under the
// timer directory). Both persist their progress in the store's config
// directory (delayOffset.json, timer.json: cfgfile framing, magic and
// version) and, after a restart, check the deliveries they may have made
// since their last save against the index so that none is made twice.
//
// The package talks to the message store through the small Host
// interface, which the root package implements: the queues to tail, the
// CommitLog reads, the delivery of a due message to its real topic, and
// the flush and dispatch waits its durability rules need.
//
// # Timer bucket file
//
// One file per minute of due times, named by the minute's first unix
// second (12 decimal digits), a sequence of 16-byte entries:
//
//	offset  size  field
//	0       8     CommitLog offset of the timer message (little endian)
//	8       4     due time, unix seconds (little endian)
//	12      4     CRC32-C of bytes 0..11
//
// A torn last entry is overwritten by the next append; a damaged entry is
// logged and skipped.
package delay
