// Package bench runs the same message-queue workloads against mqlite and,
// in the same run, against what a Go program would embed instead: NATS
// JetStream (in-process server, file storage), a bbolt bucket, a
// tidwall/wal log and a Pebble keyspace, next to probes of the machine's
// own limits (memcpy into a mapped file, sequential write bandwidth, fsync
// latency).
//
// Each system is an adapter behind [System] and [Queue]: one file per
// system (sys_*.go). The runner (workload.go) owns goroutines, timing and
// counting, so every system is driven the same way. Every (system,
// workload) pair runs in a child process (the benchmark binary re-executed
// with a job in its environment, see child.go), which isolates the systems
// from each other and gives each row its own peak RSS; a consume row takes
// two, one that writes the backlog and a new one that reopens and reads it
// (runConsumeJob). The parent collects the rows into a [Report], prints it
// as Markdown and draws an SVG chart (report.go, chart.go).
//
// The command is cmd/mqbench; README.md says what each row means.
package bench
