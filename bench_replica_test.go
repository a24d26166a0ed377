package mqlite

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// Replication benchmarks over loopback TCP, each against its limit from
// the issue, measured in the same run:
//   - async: the primary's 128 B send rate with a replica attached, as a
//     share of the rate of an unreplicated store (limit >= 0.8), and the
//     replica's lag at the end;
//   - sync: p50 send latency of 16 senders against the loopback round
//     trip (limit <= 3x), and messages per replica acknowledgement;
//   - 4KiB: replication throughput (send to acknowledged) against a plain
//     TCP copy of the same bytes (limit >= 0.7).
//
// Here primary and replica share one process (and its two cores);
// bench_replica_proc_linux_test.go runs the replica in a child process,
// as the issue means the targets.

// tcpLink links p and r over a loopback TCP connection.
func tcpLink(b *testing.B, p, r *Store) (stop func()) {
	b.Helper()
	a, c := tcpPair(b)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.ServeReplica(ctx, a) }()
	go func() { defer wg.Done(); r.ReplicateFrom(ctx, c) }()
	if err := p.WaitReplicated(ctx, 0, 1); err != nil {
		b.Fatal(err)
	}
	return func() { cancel(); wg.Wait() }
}

func tcpPair(b *testing.B) (net.Conn, net.Conn) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			b.Error(err)
		}
		ch <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	return <-ch, c
}

func replBenchStore(b *testing.B, dir string, o Options) *Store {
	b.Helper()
	o.SegmentSize = 64 << 20
	s, err := Open(filepath.Join(b.TempDir(), dir), &o)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func putLoop(b *testing.B, s *Store, n int, body []byte) time.Duration {
	ctx := context.Background()
	start := time.Now()
	for range n {
		if _, err := s.Put(ctx, &Message{Topic: "bench", Body: body}, 0); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

func BenchmarkReplicationAsync128B(b *testing.B) {
	plain := replBenchStore(b, "plain", Options{})
	defer plain.Close()
	p := replBenchStore(b, "p", Options{})
	defer p.Close()
	r := replBenchStore(b, "r", Options{Role: Replica})
	defer r.Close()
	stop := tcpLink(b, p, r)
	defer stop()
	body := make([]byte, 128)
	b.ResetTimer()
	tPlain := putLoop(b, plain, b.N, body)
	tRepl := putLoop(b, p, b.N, body)
	b.StopTimer()
	lag := p.Replicas()[0].Lag
	b.ReportMetric(float64(b.N)/tRepl.Seconds(), "msgs/s")
	b.ReportMetric(tPlain.Seconds()/tRepl.Seconds(), "of-unreplicated")
	b.ReportMetric(float64(lag), "lag-B")
}

// rtt is the median round trip of one byte over loopback TCP.
func rtt(b *testing.B) time.Duration {
	a, c := tcpPair(b)
	defer a.Close()
	defer c.Close()
	go io.Copy(c, c) // echo
	var one [1]byte
	var ds []time.Duration
	for range 2000 {
		t := time.Now()
		if _, err := a.Write(one[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(a, one[:]); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func BenchmarkReplicationSync16(b *testing.B) {
	p := replBenchStore(b, "p", Options{Replication: ReplicationOptions{Mode: ReplicationSync}})
	defer p.Close()
	r := replBenchStore(b, "r", Options{Role: Replica})
	defer r.Close()
	stop := tcpLink(b, p, r)
	defer stop()
	round := rtt(b)
	const senders = 16
	lat := make([][]time.Duration, senders)
	body := make([]byte, 128)
	acks0 := p.Replicas()[0].Acks
	b.ResetTimer()
	sendTimed(b, p, body, lat)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	p50 := all[len(all)/2]
	acks := p.Replicas()[0].Acks - acks0
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(round.Microseconds()), "rtt-µs")
	b.ReportMetric(float64(p50)/float64(round), "p50/rtt")
	b.ReportMetric(float64(b.N)/float64(max(acks, 1)), "msgs/ack")
}

// BenchmarkReplication4KiB times a replica's catch-up of a backlog of
// 4 KiB messages (attach to acknowledged end), against a plain TCP copy
// of as many bytes.
func BenchmarkReplication4KiB(b *testing.B) {
	p := replBenchStore(b, "p", Options{})
	defer p.Close()
	r := replBenchStore(b, "r", Options{Role: Replica})
	defer r.Close()
	putLoop(b, p, b.N, make([]byte, 4096))
	n := p.log.WrotePosition()
	b.SetBytes(4096)
	b.ResetTimer()
	t := time.Now()
	stop := tcpLink(b, p, r)
	if err := p.WaitReplicated(context.Background(), n, 1); err != nil {
		b.Fatal(err)
	}
	took := time.Since(t)
	b.StopTimer()
	stop()
	// A plain TCP copy of the same bytes.
	a, c := tcpPair(b)
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, c); close(done) }()
	buf := make([]byte, 256<<10)
	t = time.Now()
	for left := n; left > 0; left -= int64(len(buf)) {
		if _, err := a.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			b.Fatal(err)
		}
	}
	a.Close()
	<-done
	copyTook := time.Since(t)
	c.Close()
	b.ReportMetric(float64(n)/took.Seconds()/1e6, "repl-MB/s")
	b.ReportMetric(float64(n)/copyTook.Seconds()/1e6, "tcp-MB/s")
	b.ReportMetric(copyTook.Seconds()/took.Seconds(), "of-tcp")
}

// sendTimed has len(lat) goroutines put b.N messages of body into p
// between them (goroutine g on queue g%4), each recording the time of
// its puts in lat[g].
func sendTimed(b *testing.B, p *Store, body []byte, lat [][]time.Duration) {
	senders := len(lat)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := g; i < b.N; i += senders {
				t := time.Now()
				if _, err := p.Put(ctx, &Message{Topic: "bench", Body: body}, g%4); err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(t))
			}
		}()
	}
	wg.Wait()
}
