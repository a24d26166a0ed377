// Package consumer owns mqlite's consumer side: consumer groups and their
// members, push and pull consumers, clustering and broadcasting, rebalance
// with RocketMQ's allocation strategies, queue locks for orderly and
// hand-off, committed offsets and their persistence, local retries and the
// hand-off of failed messages to the store's retry path, flow control and
// consume timeouts. It talks to the message store only through the Source
// interface (source.go), which the root package implements; the root creates
// one Manager per store and re-exports the handles.
//
// # Groups and members
//
// A group has subscriptions (topic + Filter) and a MessageModel. In
// Clustering each queue of a subscribed topic belongs to one live member at
// a time: the group's queues are divided by an AllocateStrategy
// (Averagely, AveragelyByCircle, ConsistentHash, computed exactly as
// RocketMQ does over sorted queue ids and sorted member ids), and divided
// again whenever a member joins or leaves and every RebalanceInterval
// (queue counts may change; the retry topic may appear). Members also
// consume the group's retry topic "%RETRY%"+group. In Broadcasting every
// member consumes every queue and keeps its own progress, keyed by its
// InstanceName.
//
// A queue moves between members by a clean hand-off: the new owner waits
// for the queue's lock, which the old owner gives back only after its
// running handler calls returned and their offsets were committed. So a
// rebalance redelivers nothing when handlers succeed. A member stuck
// draining a removed queue loses the lock LockExpiry after the removal.
//
// # Delivery
//
// Each held queue has a fetcher goroutine long-polling Source.Pull (no
// sleep loop: Pull blocks until the store has a message), pausing while
// the queue's cache is full (QueueCacheCount messages or QueueCacheBytes).
// When the Source is a ReadAheadSource (a Store), the fetcher reads through
// a read-ahead buffer: PullRaw copies as many raw records as fit, and the
// fetcher decodes them into messages batch by batch as the cache has room
// (Options.ReadAheadBytes, 8 MiB per consumer by default), so what waits
// in memory has no pointers for the collector to scan.
// A PushConsumer hands batches to a bounded pool of handler goroutines
// through a FIFO of queue tokens; a worker takes the next batch from the
// queue itself, so batches start in offset order, and goes on with that
// queue's next batches (up to 32 in a row) while it has tokens no one
// claimed. While a queue has a backlog (its last pull was full) and
// caches a batch for every handler call that can run at once (the fewer
// of Goroutines and GOMAXPROCS), a concurrent consumer's worker whose
// calls are short (under 20 µs) takes up to 8 batches under one lock and
// calls the handler for each in turn, so that small batches share the
// locking and the commit. With such short calls and at least as many
// queues as processors (GOMAXPROCS), a queue's fetcher runs the batches it
// just fetched itself, in a worker's place (so that no more than
// Goroutines calls run at once), instead of handing them over: the
// fetchers alone keep every processor busy, and a batch consumed by the
// goroutine that decoded it does not move to another core. A token wakes one
// parked worker, which wakes the next if tokens remain. Concurrent
// consumers run
// many batches of a queue at once and commit the lowest offset not yet
// consumed; a failed batch goes to Source.SendBack (or is retried locally
// after SuspendInterval when that fails). Orderly consumers run at most one
// batch per queue at a time, in order; a failure suspends the queue and
// retries locally, and after MaxReconsumeTimes retries the batch is sent
// back (the store routes it to the DLQ) so a queue is never blocked
// forever. A handler call longer than ConsumeTimeout has its context
// cancelled and counts as failed; a panic counts as failed. A push
// consumer's Seek and SeekToTime reset a held queue, as RocketMQ's reset
// of a group's offsets does: the new offset is committed, the queue is
// dropped (what its running handler calls still consume is not
// committed) and taken again from there.
//
// A push consumer's Pause stops fetching and consuming a topic or some
// of its queues (RocketMQ's Suspend): running handler calls finish, the
// queue keeps its committed offset and its lock, and Resume goes on from
// there. A pause is the member's, in memory: it holds across rebalances
// (a paused topic's queues arrive paused) but not across a restart.
// Unsubscribe gives a topic's queues back to the group and is persisted
// (see PushConsumer.Unsubscribe).
//
// A PullConsumer buffers fetched messages per queue; Poll returns them,
// blocking until one is there. Commit, CommitOffset and AutoCommit decide
// what is committed; Seek and SeekToTime move the position.
//
// Messages are the handler's or the Poll caller's to keep by default. With
// Options.ReuseMessages the member passes a message.Pool to Source.Pull and
// releases each message once it is finished: after the handler call that
// consumed it (or the send-back that took its failure), and for a Poll at
// the next Poll. Messages waiting for a local retry are not released, and
// a message that is never released (dropped by a rebalance, filtered out)
// only costs its block's reuse.
//
// # Offsets
//
// Committed offsets are the next offset to consume, per (group, topic,
// queue), or per (group, instance, topic, queue) for broadcasting. They are
// kept in memory, written to OffsetsFile every PersistInterval when they
// changed, and on Close and Shutdown. A group with no offset for a queue
// starts where ConsumeFromWhere says, and that start is committed at once.
// After a crash delivery resumes from the last persisted offsets: messages
// consumed after the last write are delivered again (at-least-once), none
// is skipped. A group with no members can be moved as a whole:
// Manager.ResetOffsets sets every queue of a topic to a time (RocketMQ's
// resetOffsetByTime, Kafka's reset-offsets to a datetime), SetOffset one
// queue to an offset; while any member runs or is still shutting down
// they fail with ErrGroupActive. Group configs and subscriptions are kept
// in GroupsFile.
// format.go describes both files' frame (magic, version, length, CRC32-C,
// JSON body).
//
// # Caveats
//
//   - A handler must honour its context: Close and the consume timeout
//     cancel it but cannot stop a call that ignores it, and Close waits for
//     running calls to return.
//   - Do not call Close or Shutdown from inside a handler: they wait for
//     running handler calls, that one included.
//   - Manually assigned pull consumers (Assign) take no queue locks; the
//     caller decides who reads what.
//   - ReconsumeLater of a broadcasting consumer retries locally and then
//     drops the message (there is no per-member retry topic), as RocketMQ
//     drops broadcast failures.
package consumer
