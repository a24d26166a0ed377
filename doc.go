// Package mqlite is an embeddable, durable, in-process message store built
// on Apache RocketMQ's storage design. One Store owns a directory; producers
// and readers are goroutines in the same process. There is no network layer.
//
// # A tour
//
//	s, err := mqlite.Open(dir, &mqlite.Options{Flush: mqlite.FlushSync})
//	defer s.Close()
//	s.CreateTopic("orders", mqlite.TopicConfig{Queues: 8})
//	p, err := s.NewProducer(mqlite.ProducerOptions{})
//	res, err := p.Send(ctx, &mqlite.Message{Topic: "orders", Keys: []string{"o-42"}, Body: b})
//	c, err := s.NewPushConsumer("billing", mqlite.ConsumerOptions{})
//	c.Subscribe("orders", nil)
//	c.Start(func(ctx context.Context, msgs []*mqlite.MessageExt) mqlite.ConsumeResult { ... })
//	m, err := s.MessageByID(res.MsgID())
//
// Topics (package topic) have a fixed, growable number of queues; the
// first send creates a topic unless Options.DisableAutoCreateTopics. A
// Producer (package producer) picks a queue per message: round robin, the
// queue its ShardingKey hashes to (per-key order), or a Selector; a
// one-queue topic gives global order. Consumer groups (package consumer)
// share a topic's queues among their members (Clustering, rebalanced when
// members come and go) or give every member everything (Broadcasting);
// push consumers run handlers on a bounded pool, concurrently or one call
// per queue at a time (Orderly); pull consumers Poll. Subscriptions filter
// by tag or SQL92 (package filter) inside the store. Committed offsets
// persist; delivery is at least once. A running consumer repositions with
// Seek or SeekToTime; a stopped group is moved with
// Store.ResetConsumerOffsets (to a time) or SetConsumerOffset. ConsumerOptions.ReuseMessages
// recycles consumed messages' memory (a drain then allocates almost
// nothing), at the price of messages that live only until the handler
// returns or the next Poll: Clone what you keep.
//
// A message with a DelayLevel goes to the schedule topic and comes back
// to its topic when due; one with a DeliverAt time goes to the timer topic
// and is bucketed on disk by due minute (package delay runs both). The result of such a send has
// Delayed set, the queue of delivery and QueueOffset -1 (assigned at
// delivery); MessageByID of its ID returns the delivered message once
// delivered (it has its own ID). A handler's ReconsumeLater sends
// the message to the group's retry topic with a growing delay, and past
// the group's limit to its dead-letter topic (DeadLetters, Redrive).
// Transactions (package txn) store a half message, run the local
// transaction, and commit, roll back, or leave it to a check-back that
// survives restarts. All timing runs on Options.Clock.
//
// Options.ReadOnly opens an existing store beside the process that owns
// it (or while none does), as the admin tool cmd/mqlite does: no lock, no
// change to any file, no goroutine; a view as of Open in which the queues
// are as far as the owner had dispatched them, and every write call fails
// with ErrReadOnly (see readonly.go).
//
// Replication (replication.go) copies a primary's CommitLog to replicas
// byte for byte over a stream the caller supplies (ServeReplica on the
// primary, ReplicateFrom on a store opened with Options.Role Replica;
// package replication has TCP helpers). A replica builds its own indexes,
// serves reads and refuses writes with ErrReplica; ReplicationSync makes a
// send wait for in-sync replicas; Promote fails over, and epochs cut a
// returning old primary's unreplicated tail. Stats().Replication shows
// where each replica stands (or, on a replica, how far behind it is).
//
// # Data path
//
// A send validates the message (package message), takes the CommitLog's one
// append lock, assigns the queue offset and store time, and encodes the
// record straight into the mapped segment (package commitlog) with no
// intermediate buffer. Then the flush mode applies (package flush): with
// FlushSync the caller waits for the group commit whose sync covers its
// record; with FlushAsync a background flusher syncs every FlushInterval
// once FlushLeastPages are dirty, and everything every
// FlushThoroughInterval. A flush first takes the complete pages it syncs
// out of the page tables, so that writing them back costs one TLB
// shootdown instead of one per page (the ConsumeQueue and IndexFile
// flushes do the same). A background allocator creates and preallocates
// the next segment before it is needed and, from the first append after
// Open on (a store opened only to be read pre-faults nothing), pre-faults
// its head and keeps up to 64 MiB ahead of the write position pre-faulted
// (a lead that follows the write rate, from 2 MiB, so that a slow writer's
// pre-faulted pages are not written back as zeros before it fills them),
// so appends take no page faults unless they outrun it (then they fault
// the pages in themselves rather than wait). A FlushAsync store maps the
// segment being written for huge pages; a FlushSync one keeps single
// pages there, so that a group commit writes back only what it synced,
// and on Linux writes its records into the segment file with pwrite
// instead of through the mapping, so that a sync has no page-table entry
// to write-protect. Once retention removes segments, the allocator
// recycles them instead: up to two removed segment files are kept and
// renamed to be the next segments, whose pages are still in memory
// (Options.NoRecycle turns this off).
//
// A dispatcher goroutine tails the CommitLog and, for every record, appends
// a 20-byte entry to the record's ConsumeQueue (package consumequeue, one per
// topic and queue) and its keys and unique key to the IndexFile (package
// indexfile), then wakes readers blocked in ReadQueue. While it sleeps and
// the put rate is low (up to 500,000 a second), a sender dispatches its own
// record instead of waking it, so with FlushAsync a message is readable
// when Put returns; under a higher rate the dispatcher runs beside the
// senders. With FlushSync it dispatches only flushed records, so a reader
// never sees a message that a power loss could take back
// (Options.ReadUncommitted relaxes this). Readers
// go ConsumeQueue -> CommitLog, and check that the record is the one the
// entry claims.
//
// # Directory layout
//
//	dir/
//	  lock          held (flock) while a Store has the directory (a read-only one takes none)
//	  abort         present while open; found at Open => the last run crashed
//	  checkpoint    how far the CommitLog is durable and the indexes built, and each
//	                queue's entry count then (atomic replace)
//	  commitlog/    segments named by 20-digit start offset
//	  consumequeue/{topic}/{queue}/  entry files named by logical byte offset, plus meta
//	  index/        IndexFiles named by their first CommitLog offset
//	  config/       topics, consumer groups and offsets, delay and transaction progress
//	                (JSON behind a magic, version and CRC32-C header, replaced atomically)
//	  timer/        pending deliver-at timers, one file per due minute
//	  epochs        store ID and primary terms, once the store replicates (epoch.go)
//
// Files are created owner-only (0600, directories 0700) unless
// Options.FileMode widens them. With the default sizes a small store takes
// about 75 MB of disk while open (two preallocated 32 MiB CommitLog
// segments, a 5.3 MiB IndexFile, 1.25 MiB per ConsumeQueue file) and about
// 40 MB closed; RocketMQ's sizes (1 GiB segments, 300,000-entry queue
// files) are one option away (Options.SegmentSize, ConsumeQueueEntries,
// IndexSlots, IndexEntries).
//
// At Open, entries past the recovered CommitLog end are dropped, and what
// the indexes miss (from the checkpoint's dispatched offset, or from the
// start when the checkpoint is missing, an index folder was deleted or
// damaged, the topic registry is missing, or a queue holds fewer entries
// than the checkpoint counted) is re-dispatched; re-dispatch is
// idempotent. Queue offsets never go back: a queue whose files went with
// every record they pointed to goes on from the count.
//
// # Promises
//
//   - FlushSync: a Put that returned nil survives kill -9 and power loss.
//   - FlushAsync: kill -9 loses nothing the OS accepted; power loss may lose
//     the last flush interval, never what was flushed before.
//   - Recovery never panics on damaged files: a torn tail is truncated and
//     reported (Store.Recovery; LostFlushedBytes when the checkpoint says
//     it had been flushed, as for a missing last segment); damage followed
//     by data proven durable is an ErrCorrupt naming the file and offset,
//     and nothing is changed.
//   - A failed sync fences the store: the waiting senders get the error,
//     later writes get ErrFenced, reads keep working, and nothing is
//     acknowledged that is not on disk. So does an I/O error that stops
//     the dispatcher (the ConsumeQueue or IndexFile cannot be written):
//     nothing sent after it could reach a queue before a reopen. Close
//     of a fenced store returns the fencing error, and the next Open
//     recovers as after a crash.
//   - Bad input gets an error matching a sentinel (errors.Is) and stores
//     nothing.
//   - Under pressure sends fail fast instead of queueing without bound:
//     ErrDiskFull above Options.DiskMaxUsedRatio or when a segment cannot
//     be allocated (sends resume once there is room), ErrFlowControl while
//     the write path is stalled past Options.FlowControlThreshold or, if
//     set, the dispatcher is more than Options.MaxDispatchLag behind.
//   - A filling disk never deletes unexpired messages unless asked: by
//     default (DiskFullReject) sends fail with ErrDiskFull above
//     Options.DiskMaxUsedRatio (0.90) and nothing is deleted early;
//     Options.DiskFullPolicy DiskFullDeleteOldest or Options.MaxStoreBytes
//     opt in to deleting the oldest segments before their retention age,
//     and each such deletion warns through Options.Logger (slog.Default
//     when none is set: the default logger discards routine logs, never a
//     loss), counts in Stats.Retention and calls Options.StatsObserver.
//   - Retention removes whole sealed segments older than Options.Retention
//     (or, when opted in, to meet the disk ratio and size cap); a reader in the middle of
//     a removed segment finishes first, later reads get ErrNotFound, and
//     consumers behind the new minimum continue from it. Minimum offsets
//     only move forward, across restarts and crashes too. A recycled
//     segment's old records are never read as records (each stores its own
//     offset), and no segment a read-only Store has mapped is recycled.
//   - Damage found while running is never delivered: a read of a record
//     that fails its checksum returns ErrCorrupt (ReadQueue: with the
//     messages before it), and a consumer waits at it, showing the error
//     in QueueStats.FetchError, until a Seek moves it past (or, with
//     ConsumerOptions.SkipDamaged, steps over it and counts it). A record
//     damaged before dispatch stops the dispatcher and fences the store.
//   - A read-only Store never changes a byte of the directory, and the
//     process that owns it is not disturbed.
//   - Replication: a replica's CommitLog is byte-identical to its
//     primary's up to its end, every chunk checked before it is written.
//     ReplicationSync: a send that returned nil is on MinInSyncReplicas
//     replicas too (kill -9 of the primary loses it nowhere once one of
//     them is promoted); ReplicationAsync: a failover loses at most what
//     the replica had not received. A store whose history parted from its
//     primary's loses only the tail past the parting point, reported and
//     never served; one that cannot be repaired so is refused unchanged.
//   - An open store holds one file descriptor (the lock); a failed Open
//     leaves no goroutine, mapping or descriptor behind.
//
// # Deterministic runs
//
// A test harness can make a run repeatable: open the store with
// Options.Clock a clock.Fake, Options.InMemory and a non-zero
// Options.Seed, drive time with Advance and finish each step with
// Store.Settle. The seed replaces every random choice: the prefix of the
// unique keys the store generates, each producer's round-robin start per
// topic (derived from the seed and the order producers are made) and the
// transaction IDs of transaction producers; consumers take their queues in
// queue order. Everything else is already a function of the calls made
// and the fake clock: message IDs are CommitLog offsets, consumer instance
// names count up, rebalancing sorts its members. So the same script run
// twice gives the same message IDs, unique keys, queue choices, offsets,
// store times, deliveries per consumer (with reconsume counts), retry
// times and dead letters. TestDeterministicRuns checks it.
//
// The promise holds while the script keeps to these rules; where it does
// not, the order of some writes depends on the Go scheduler, and every
// offset and message ID after them with it:
//
//   - One handler goroutine per push consumer (ConsumerOptions.Goroutines
//     1); with more, handler calls run in parallel.
//   - Each push consumer gets new messages on one queue per step. A
//     consumer fetches each queue on its own goroutine, so messages that
//     arrive on several of its queues before a Settle are handled in an
//     interleaving the scheduler picks (each queue's own order is kept).
//     A batch goes to one queue; pull consumers are not affected (after a
//     Settle, Poll takes from the queues in a fixed order).
//   - Background writes do not overlap: the delay levels, the timer
//     service and push consumers' send-backs (retries, dead letters) run
//     on their own goroutines, so two messages due at the same step (two
//     retries, a retry and a delayed message), or a retry sent back while
//     another message falls due, are written in an order the scheduler
//     picks. A script keeps at most one message at a time on its way
//     through them.
//   - Transaction check-backs run through Store.CheckTransactions, with
//     Options.TxCheckInterval longer than the run; the periodic round
//     runs on its own goroutine.
//   - No concurrent sends, and no SendAsync: its callbacks run on other
//     goroutines, in an order the scheduler picks.
//   - Options.FlowControlThreshold measures stalls on the real clock: a
//     very slow machine can see ErrFlowControl where another does not.
//     Latencies in Stats.Throughput are real-clock measurements.
//
// Options.Stepped lifts the first four rules: the store's background work
// then runs only inside Settle, on the caller's goroutine, in a fixed
// order. Push consumers start no fetch or handler goroutines (however
// many ConsumerOptions.Goroutines say); each round of Settle runs the
// delay levels' due messages (levels ascending, each in queue order), the
// timer service's (by due time, then CommitLog order), then every
// consumer in creation order: its queues in (topic, queue ID) order,
// each fetched to its end (as far as flow control allows) and, for a push
// consumer, handed to the handler batch by batch in offset order (an
// orderly queue the same way, suspending on a failure), each result
// applied (ack, send-back to the retry topic or the dead-letter queue,
// local redelivery) before the next call. Rounds repeat until one changes
// nothing. A transaction check-back round runs at the start of a Settle
// once TxCheckInterval has passed on the clock since the last (and
// whenever CheckTransactions is called), never on a ticker. So a script
// may send to several queues, run many handler goroutines, keep several
// retries and delayed messages in flight and skip Settles, and two runs
// still give the same history event for event: message IDs, queues,
// offsets, deliveries in one global order with their reconsume counts,
// retry times, dead letters and committed offsets.
// TestSteppedDeterministicRuns checks it. What stays with the scheduler
// under Stepped: SendAsync callbacks (their interleaving with the
// script), sends from several goroutines at once, anything the real
// clock measures (flow control, Stats latencies), and retention passes,
// which run on the clock's ticks beside the script. Consumers do nothing
// between Settles: a pull consumer's Poll returns what the last Settle
// fetched, and a handler runs on the goroutine that called Settle. Stepped
// needs a clock.Fake; it is meant for tests, never for production.
//
// The CommitLog's end at Open is part of the seed, so a store reopened
// with the same seed does not repeat the unique keys and transaction IDs
// of its previous run (and the same runs still repeat exactly). Two
// stores with the same seed and history generate the same unique keys:
// use the seed in tests only, never for stores whose messages meet.
//
// # Where to look
//
// commitlog (segments, frame format, recovery), consumequeue and indexfile
// (derived indexes, usable alone), flush (group commit and periodic
// flush), message (message model, payload layout, IDs), topic (registry
// and names), producer, consumer, filter, txn, delay (delay levels and
// timer wheel), clock (injectable time), replication (a TCP transport
// for replication), hook (send and consume interceptors), dashboard (an
// http.Handler over a Store), vfs (the public file seam, with the in-memory and fault-injecting
// implementations; Options.FS runs a Store on any of them, for your own
// fault and power-loss tests), cmd/mqlite (the admin tool), bench (a
// separate module comparing mqlite with its peers). examples/quickstart is
// the README's demo; examples/storage builds a broker core on commitlog,
// consumequeue and indexfile alone.
//
// # Caveats
//
// Segments are memory-mapped. Views handed to callbacks (Store.View) alias
// the mapping and are valid only inside the callback. A memory fault while
// touching a mapping (for example a segment truncated by another process)
// is turned into ErrIO and fences the store instead of crashing the process.
package mqlite
