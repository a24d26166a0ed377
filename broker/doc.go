// Package broker serves an mqlite Store to Apache RocketMQ clients over
// RocketMQ's remoting protocol, so that an application written against
// the official Go client (github.com/apache/rocketmq-client-go/v2) runs
// unchanged against one mqlite process, and against a RocketMQ cluster
// when it outgrows one machine: same client, one address changed.
//
//	st, _ := mqlite.Open(dir, &mqlite.Options{Flush: mqlite.FlushSync})
//	b, _ := broker.Listen(st, &broker.Options{Addr: "127.0.0.1:10911"})
//	// clients: producer.WithNameServer([]string{"127.0.0.1:10911"})
//	...
//	b.Shutdown(ctx)
//	st.Close()
//
// One listener plays both roles of a RocketMQ deployment: name server
// (route data, cluster info; a topic a client asks about is created, as
// RocketMQ's autoCreateTopicEnable and TBW102 do) and the single broker
// (ID 0) of cluster Options.ClusterName. The Store does the work: sends are
// Put / PutBatch, pulls are ReadQueueFiltered (the subscription's tag or
// SQL92 filter evaluated in the store; a suspended pull waits inside it and
// is woken by the store's dispatcher, no polling interval),
// offsets are the Store's (CommitOffset, persisted with its periodic
// write), send-back is SendBack (retry topic, delay levels, DLQ), half
// messages go through a per-group TransactionProducer whose check-back asks
// the remote producer (CHECK_TRANSACTION_STATE on its connection), queries
// are MessagesByKey and ReadAt.
//
// # Connections
//
// Each connection has a reader goroutine (one frame at a time, bounded by
// Options.MaxFrame, idle connections closed after Options.IdleTimeout),
// a goroutine per request in flight (at most Options.MaxPendingPerConn,
// more get SYSTEM_BUSY) and a writer goroutine. A malformed frame closes
// its connection; a bad request gets RocketMQ's error response and the
// connection lives on; an unknown request code gets
// REQUEST_CODE_NOT_SUPPORTED. Shutdown stops accepting, ends long polls,
// answers the requests in flight, then closes the connections; it closes
// the Store only when Options.CloseStore says the broker owns it.
//
// # Security
//
// The listener binds loopback by default. Options.TLS turns on TLS
// (the client's WithTls); Options.ACL checks RocketMQ's signed requests
// (the client's WithCredentials) and per-topic and per-group permissions.
//
// # Differences from RocketMQ
//
//   - One broker, no replication: a slave, DLedger or controller mode is
//     not offered; clients see one master.
//   - The message ID a send returns (offsetMsgId) encodes the advertised
//     address and the CommitLog offset as RocketMQ's; the ID of a
//     transactional half message names offset 0 (the client uses only the
//     transaction ID to end it).
//   - The RocketMQ binary header (serialization type 1) is refused; the
//     Go and Java clients use JSON by default.
//   - Replies of request-reply are pushed to the requester's connection,
//     not stored in a reply topic.
//   - Pop consumption, gRPC (RocketMQ 5 proxy), message tracing topics and
//     admin commands other than topic creation and runtime info are not
//     served (REQUEST_CODE_NOT_SUPPORTED).
package broker
