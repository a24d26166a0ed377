// Package txn owns transactional messages, as RocketMQ has them: the half
// message, the local transaction, commit and rollback, the op log that
// records outcomes, and the check-back service that resolves what a
// producer left open. It talks to the store through the small Host
// interface, which the root package implements.
//
// # Life of a transaction
//
//  1. Producer.SendInTransaction validates the message, picks its real queue
//     (selector, sharding key, else round robin) and stores a half message
//     in topic.Half queue 0, with properties REAL_TOPIC, REAL_QID, PGROUP
//     (the producer group), TRAN_MSG=true and the message's unique key,
//     which is the transaction ID. Nobody may subscribe to a system topic,
//     so the half message is invisible.
//  2. It runs the local transaction, which answers CommitMessage,
//     RollbackMessage or Unknown.
//  3. Commit stores the message in its real topic and queue (SysTxCommit,
//     PreparedTxOffset = the half message's CommitLog offset, same unique
//     key), then writes a done op record. Rollback writes only the op
//     record. Unknown writes nothing.
//  4. The Service reads the half and op queues every CheckInterval. A half
//     message with no done record, older than Timeout (or its
//     CHECK_IMMUNITY_TIME_IN_SECONDS), is checked back: the checker
//     registered for its producer group answers, and the answer is applied
//     as in step 3. After MaxChecks unanswered checks the message is
//     discarded (a done record), and with ParkAfterMax first copied to
//     topic.CheckMax.
//
// While a local transaction runs in this process, its message is never
// checked back, and the service learns each outcome a Producer records
// before its next check: a half message is resolved once.
//
// # Op log
//
// topic.OpHalf queue 0 holds one record per event, body = the half
// message's queue offset in decimal (a comma-separated list is also read,
// as RocketMQ 5 batches them):
//
//	tags  meaning
//	"d"   resolved: committed, rolled back or discarded (RocketMQ's tag);
//	      property TX_STATE says which, for people reading the log
//	"c"   one check-back started (written before the checker is called)
//
// Check counts are thus persisted by "c" records rather than by re-storing
// the half message with an incremented TRANSACTION_CHECK_TIMES, as
// RocketMQ does: a record of a few bytes instead of a copy of the body per
// check. A crash after a "c" record and before the answer loses no count.
//
// # Progress file
//
// config/txnProgress.json is a cfgfile (magic "MQTX", version 1, CRC32-C)
// holding {"half": H, "op": O}: every half message below H is resolved,
// and no op record below O names a half message at or above H. It is
// written after each check round and on Close. A damaged file is an
// ErrCorrupt naming it; offsets past the end of their queues (a tail lost
// to power loss under asynchronous flush) are moved back to the end.
//
// # Recovery
//
// On Start the service reads the half queue from H and the op queue from
// O, merged in CommitLog order, so that the pending set only ever holds
// messages unresolved at that point of the log; memory is proportional
// to unresolved half messages. Then:
//
//   - a crash between the half message and the decision leaves the message
//     pending: it is checked back;
//   - a crash between the real message and its op record leaves it pending
//     too, but before asking the checker the service calls
//     Host.HasUniqKey(real topic, transaction ID, half store time); when
//     the real message exists it only writes the op record, so nothing is
//     delivered twice;
//   - a crash between a message parked in topic.CheckMax and its op record
//     is handled the same way.
//
// # Caveats
//
//   - Transactional messages cannot be delayed (as in RocketMQ) and are
//     not compressed.
//   - A message whose producer group has no registered checker stays
//     pending (not counted) until one registers; the progress file cannot
//     move past it, so the next Start rereads the queues from there.
//   - A caller-set UniqKey must be unique: it is the transaction ID and the
//     key HasUniqKey looks up.
//   - The checker runs on the service's goroutine, one message at a time;
//     a slow checker slows the round.
package txn
