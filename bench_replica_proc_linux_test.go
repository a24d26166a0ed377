//go:build linux

package mqlite

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Replication benchmarks as issue 39 means them: the replica runs in its
// own process (the test binary re-run as a child, like the kill -9
// tests), over loopback TCP, and each target's yardstick is measured in
// the same run against the same child: the loopback round trip (an echo
// in the child) and a plain TCP copy of the same bytes (a sink in the
// child), and beside them the probes of what the machine allows
// (bench_replica_probe_linux_test.go).
//
//	go test -run '^$' -bench 'ReplicationProc' -benchtime 2000000x .
//
// -repl.childprof=PREFIX writes the child's CPU profile to
// PREFIX.<benchmark>.pprof (the parent's: -cpuprofile as usual).

var replChildProf = flag.String("repl.childprof", "", "CPU profile of the replica child process: path prefix")

var replChunk = flag.Int("repl.chunk", 0, "ReplicationOptions.ChunkSize of BenchmarkReplicationProc4KiB (0: the default)")

var replPair = flag.Bool("repl.pair", true, "BenchmarkReplicationProcAsync128B: measure the two-store probe (false: only the lone unreplicated and the replicated rates)")

const replProbeName = "TestReplBenchReplicaChild"

// remote is a replica in a child process, fed by a primary in this one.
type remote struct {
	b    *testing.B
	c    *child
	echo string // the child's echo listener
	sink string // the child's sink listener
	// the child's probes (bench_replica_probe_linux_test.go)
	filesink, load, replecho string
	cancel                   context.CancelFunc
	served                   chan error
}

// startRemote starts a replica child and serves it from p; it returns once
// the replica is attached (ServeReplica running).
func startRemote(b *testing.B, p *Store, replicaEnv ...string) *remote {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	var args []string
	if *replChildProf != "" {
		name := strings.NewReplacer("/", "_", " ", "_").Replace(b.Name())
		args = append(args, "-test.cpuprofile="+*replChildProf+"."+name+".pprof")
	}
	dir := filepath.Join(b.TempDir(), "replica")
	c, err := startChildArgs(b, replProbeName, dir, nil, args, append(replicaEnv, replAddrEnv+"="+ln.Addr().String())...)
	if err != nil {
		b.Fatal(err)
	}
	probes := c.expect("probes")
	conn, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &remote{b: b, c: c, echo: probes[0], sink: probes[1], filesink: probes[2], load: probes[3], replecho: probes[4],
		cancel: cancel, served: make(chan error, 1)}
	go func() { r.served <- p.ServeReplica(ctx, conn) }()
	return r
}

// stop ends the session and waits for the child to close its store.
func (r *remote) stop() {
	r.cancel()
	<-r.served
	r.c.expect("ended")
	r.c.wait()
}

// rtt is the median round trip of one byte to the child's echo.
func (r *remote) rtt() time.Duration {
	conn, err := net.Dial("tcp", r.echo)
	if err != nil {
		r.b.Fatal(err)
	}
	defer conn.Close()
	var one [1]byte
	ds := make([]time.Duration, 0, 2000)
	for range cap(ds) {
		t := time.Now()
		if _, err := conn.Write(one[:]); err != nil {
			r.b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, one[:]); err != nil {
			r.b.Fatal(err)
		}
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// copyTime is how long a plain TCP copy of n bytes to the child's sink
// takes, until the sink has read them all.
func (r *remote) copyTime(n int64) time.Duration {
	return r.copyTo(r.sink, n)
}

// copyTo is how long a plain TCP copy of n bytes to the child's listener
// at addr takes, until it answers that it has read them all.
func (r *remote) copyTo(addr string, n int64) time.Duration {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		r.b.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 256<<10)
	t := time.Now()
	for left := n; left > 0; left -= int64(len(buf)) {
		if _, err := conn.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			r.b.Fatal(err)
		}
	}
	r.copyDone(conn)
	return time.Since(t)
}

// copyDone ends a copy to the child's sink: it closes the sending side and
// waits for the sink's one-byte answer that it read everything.
func (r *remote) copyDone(conn net.Conn) {
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		r.b.Fatal(err)
	}
	var one [1]byte
	if _, err := io.ReadFull(conn, one[:]); err != nil {
		r.b.Fatal(err)
	}
}

// BenchmarkReplicationProcAsync128B: the primary's 128 B send rate with a
// replica attached against an unreplicated store's (target >= 0.8), in
// alternating rounds (the replica catches up between rounds, untimed),
// and the replica's lag sampled every 50 ms during the replicated rounds:
// its maximum in the first and the second half of the run (bounded: the
// second no larger than the first, give or take). The probe: the
// unreplicated rate again while a second store in the child takes 128 B
// Puts (pair-msgs/s; of-pair is the replicated rate against it).
func BenchmarkReplicationProcAsync128B(b *testing.B) {
	plain := replBenchStore(b, "plain", Options{})
	defer plain.Close()
	p := replBenchStore(b, "p", Options{})
	defer p.Close()
	rr := startRemote(b, p)
	defer rr.stop()
	ctx := context.Background()
	if err := p.WaitReplicated(ctx, 0, 1); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 128)
	const rounds = 10
	var tPlain, tPair, tRepl time.Duration
	var loadRate float64
	var acks int64
	var lagMax [2]int64
	var lagEnd int64
	b.ResetTimer()
	for i := range rounds {
		n := b.N / rounds
		if i == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		tPlain += putLoop(b, plain, n, body)
		// The limit probe: unreplicated again, while a second store in
		// the child takes the same kind of load.
		if *replPair {
			took, rate := rr.withLoad(func() time.Duration { return putLoop(b, plain, n, body) })
			tPair += took
			loadRate += rate / rounds
		}
		stop := sampleLag(p)
		acks0 := p.Replicas()[0].Acks
		tRepl += putLoop(b, p, n, body)
		acks += p.Replicas()[0].Acks - acks0
		lagEnd = p.Replicas()[0].Lag
		lagMax[i*2/rounds] = max(lagMax[i*2/rounds], stop(), lagEnd)
		b.StopTimer()
		if err := p.WaitReplicated(ctx, p.log.WrotePosition(), 1); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/tRepl.Seconds(), "msgs/s")
	b.ReportMetric(float64(b.N)/tPlain.Seconds(), "plain-msgs/s")
	b.ReportMetric(tPlain.Seconds()/tRepl.Seconds(), "of-unreplicated")
	if *replPair {
		b.ReportMetric(float64(b.N)/tPair.Seconds(), "pair-msgs/s")
		b.ReportMetric(loadRate, "child-load-msgs/s")
		b.ReportMetric(tPair.Seconds()/tRepl.Seconds(), "of-pair")
	}
	b.ReportMetric(float64(b.N)/float64(max(acks, 1)), "msgs/ack")
	b.ReportMetric(float64(lagMax[0]), "lag-max-1st-B")
	b.ReportMetric(float64(lagMax[1]), "lag-max-2nd-B")
	b.ReportMetric(float64(lagEnd), "lag-end-B")
}

// BenchmarkReplicationProcAsyncSteady128B: the primary sends 128 B
// messages without a pause (no catching up between rounds; run it for
// about 10 s, e.g. -benchtime 3000000x) and the replica's lag is sampled
// every 50 ms: its maximum in the first and the last tenth of the run and
// over the whole run, and at the end. Bounded means the last tenth's is
// not above the first's by more than noise.
func BenchmarkReplicationProcAsyncSteady128B(b *testing.B) {
	p := replBenchStore(b, "p", Options{})
	defer p.Close()
	rr := startRemote(b, p)
	defer rr.stop()
	if err := p.WaitReplicated(context.Background(), 0, 1); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 128)
	const windows = 10
	var lagMax [windows]int64
	var took time.Duration
	b.ResetTimer()
	for i := range windows {
		n := b.N / windows
		if i == windows-1 {
			n = b.N - n*(windows-1)
		}
		stop := sampleLag(p)
		took += putLoop(b, p, n, body)
		lagMax[i] = stop()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/took.Seconds(), "msgs/s")
	b.ReportMetric(float64(lagMax[0]), "lag-max-first-B")
	b.ReportMetric(float64(lagMax[windows-1]), "lag-max-last-B")
	b.ReportMetric(float64(slices.Max(lagMax[:])), "lag-max-B")
	b.ReportMetric(float64(p.Replicas()[0].Lag), "lag-end-B")
}

// sampleLag samples the first replica's lag every 50 ms until stop, which
// returns the largest seen.
func sampleLag(p *Store) (stop func() int64) {
	done := make(chan struct{})
	res := make(chan int64, 1)
	var seen int64
	go func() {
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-done:
				res <- seen
				return
			case <-tk.C:
				if rs := p.Replicas(); len(rs) > 0 {
					seen = max(seen, rs[0].Lag)
				}
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-res
	}
}

// BenchmarkReplicationProcSync16: p50 send latency of 16 senders on a
// ReplicationSync primary (FlushAsync on both sides) against the loopback
// round trip to the child, measured before and after (target <= 3x), and
// messages per replica acknowledgement. The probe: the same 16 senders
// through the replecho (p50/echo is ours against it); the CPU time a
// message in both processes, ours and the probe's.
func BenchmarkReplicationProcSync16(b *testing.B) {
	p := replBenchStore(b, "p", Options{Replication: ReplicationOptions{Mode: ReplicationSync}})
	defer p.Close()
	rr := startRemote(b, p)
	defer rr.stop()
	if err := p.WaitReplicated(context.Background(), 0, 1); err != nil {
		b.Fatal(err)
	}
	round := rr.rtt()
	const senders = 16
	lat := make([][]time.Duration, senders)
	body := make([]byte, 128)
	acks0 := p.Replicas()[0].Acks
	cpu0 := rr.cpu()
	b.ResetTimer()
	sendTimed(b, p, body, lat)
	b.StopTimer()
	acks := p.Replicas()[0].Acks - acks0
	cpu1 := rr.cpu()
	echo, echoPerAck := rr.replEchoLatency(senders, b.N, len(body))
	cpu2 := rr.cpu()
	round = (round + rr.rtt()) / 2
	all := slices.Concat(lat...)
	slices.Sort(all)
	p50 := all[len(all)/2]
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(round.Microseconds()), "rtt-µs")
	b.ReportMetric(float64(p50)/float64(round), "p50/rtt")
	b.ReportMetric(float64(b.N)/float64(max(acks, 1)), "msgs/ack")
	e50 := echo[len(echo)/2]
	b.ReportMetric(float64(e50.Microseconds()), "echo-p50-µs")
	b.ReportMetric(float64(p50)/float64(e50), "p50/echo")
	b.ReportMetric(echoPerAck, "echo-msgs/ack")
	// CPU time a message (both processes, 10 ms ticks): on two cores the
	// store's own work shows in the latency.
	b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N)/1e3, "cpu-µs/msg")
	b.ReportMetric(float64((cpu2-cpu1).Nanoseconds())/float64(b.N)/1e3, "echo-cpu-µs/msg")
}

// BenchmarkReplicationProc4KiB: a replica child's catch-up of a backlog of
// b.N 4 KiB messages (attach to acknowledged end) against two plain TCP
// copies of as many bytes to the same child's sink (target >= 0.7): of-tcp,
// one hot 256 KiB buffer written over and over; of-segtcp, the primary's
// own CommitLog bytes read from its segment files (pread into a reused
// buffer, then write), the "a plain TCP copy of the same bytes".
// Beside them a TCP copy into preallocated files in the child (of-file),
// the probe of what storing the bytes costs here, and the primary's minor
// page faults during the catch-up.
func BenchmarkReplicationProc4KiB(b *testing.B) {
	p := replBenchStore(b, "p", Options{Replication: ReplicationOptions{ChunkSize: *replChunk}})
	defer p.Close()
	putLoop(b, p, b.N, make([]byte, 4096))
	n := p.log.WrotePosition()
	b.SetBytes(4096)
	b.ResetTimer()
	rr := startRemote(b, p)
	// The child opened its store before it dialled: from the accept on,
	// it is the stream.
	me := os.Getpid()
	t0, cpu0, own0, flt0 := time.Now(), rr.cpu(), procCPU(b, me), procFaults(b, me)
	if err := p.WaitReplicated(context.Background(), n, 1); err != nil {
		b.Fatal(err)
	}
	took, cpu1, own1, flt1 := time.Since(t0), rr.cpu(), procCPU(b, me), procFaults(b, me)
	b.StopTimer()
	copyTook := rr.copyTime(n)
	cpu2, own2 := rr.cpu(), procCPU(b, me)
	segTook := rr.segCopyTime(p, n)
	cpu3, own3 := rr.cpu(), procCPU(b, me)
	fileTook := rr.fileCopyTime(n)
	cpu4 := rr.cpu()
	rr.stop()
	b.ReportMetric(float64(n)/took.Seconds()/1e6, "repl-MB/s")
	b.ReportMetric(float64(n)/copyTook.Seconds()/1e6, "tcp-MB/s")
	b.ReportMetric(copyTook.Seconds()/took.Seconds(), "of-tcp")
	b.ReportMetric(float64(n)/segTook.Seconds()/1e6, "segtcp-MB/s")
	b.ReportMetric(segTook.Seconds()/took.Seconds(), "of-segtcp")
	b.ReportMetric(float64(n)/fileTook.Seconds()/1e6, "file-MB/s")
	b.ReportMetric(fileTook.Seconds()/took.Seconds(), "of-file")
	b.ReportMetric(float64(flt1-flt0), "repl-primary-faults")
	// CPU time per MB (both processes), which a loaded machine disturbs
	// less than the wall clock.
	mb := float64(n) / 1e6
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/mb, "repl-cpu-µs/MB")
	b.ReportMetric(float64((cpu2-cpu1).Microseconds())/mb, "tcp-cpu-µs/MB")
	b.ReportMetric(float64((cpu3-cpu2).Microseconds())/mb, "segtcp-cpu-µs/MB")
	b.ReportMetric(float64((cpu4-cpu3).Microseconds())/mb, "file-cpu-µs/MB")
	// The same split by process: the primary's (this one, sending) and
	// the replica child's (receiving).
	b.ReportMetric(float64((own1-own0).Microseconds())/mb, "repl-primary-µs/MB")
	b.ReportMetric(float64((cpu1-cpu0-(own1-own0)).Microseconds())/mb, "repl-replica-µs/MB")
	b.ReportMetric(float64((own2-own1).Microseconds())/mb, "tcp-sender-µs/MB")
	b.ReportMetric(float64((cpu2-cpu1-(own2-own1)).Microseconds())/mb, "tcp-receiver-µs/MB")
	b.ReportMetric(float64((own3-own2).Microseconds())/mb, "segtcp-sender-µs/MB")
	b.ReportMetric(float64((cpu3-cpu2-(own3-own2)).Microseconds())/mb, "segtcp-receiver-µs/MB")
}

// cpu is the CPU time (user and system) used so far by this process and
// the child, from /proc (10 ms ticks).
func (r *remote) cpu() time.Duration {
	return procCPU(r.b, os.Getpid()) + procCPU(r.b, r.c.cmd.Process.Pid)
}

func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	var ticks int64
	for _, i := range []int{11, 12} { // utime, stime (fields 14 and 15)
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// TestReplBenchReplicaChild is the benchmarks' replica: it opens a store
// as a replica, serves an echo and a sink on loopback (the probes), and
// follows the primary at MQLITE_REPL_ADDR until the stream ends.
func TestReplBenchReplicaChild(t *testing.T) {
	dir := childDir(t, replProbeName)
	s, err := Open(dir, &Options{Role: Replica, SegmentSize: 64 << 20})
	if err != nil {
		childFail(t, "open: %v", err)
	}
	var wg sync.WaitGroup
	echo := probeListener(t, &wg, func(c net.Conn) { io.Copy(c, c) })
	sink := probeListener(t, &wg, func(c net.Conn) {
		io.Copy(io.Discard, c)
		c.Write([]byte{1})
	})
	more := childProbes(t, &wg, filepath.Dir(dir))
	emit("probes %s %s %s %s %s", echo.Addr(), sink.Addr(), more[0].Addr(), more[1].Addr(), more[2].Addr())
	conn, err := net.Dial("tcp", os.Getenv(replAddrEnv))
	if err != nil {
		childFail(t, "dial: %v", err)
	}
	err = s.ReplicateFrom(context.Background(), conn)
	echo.Close()
	sink.Close()
	for _, ln := range more {
		ln.Close()
	}
	wg.Wait()
	if cerr := s.Close(); cerr != nil {
		childFail(t, "close: %v", cerr)
	}
	emit("ended %s", strings.ReplaceAll(fmt.Sprint(err), "\n", " "))
}

// probeListener serves each connection with serve (then closes it) until
// the listener is closed.
func probeListener(t *testing.T, wg *sync.WaitGroup, serve func(net.Conn)) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		childFail(t, "listen: %v", err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln
}
