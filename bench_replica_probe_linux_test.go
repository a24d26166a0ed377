//go:build linux

package mqlite

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Probes of the machine's limits for the replication benchmarks, served by
// the replica child beside its echo and sink (bench_replica_proc_linux_test.go),
// so that a target the machine cannot reach shows in the same run:
//   - filesink: a TCP copy into files: the child writes what it receives
//     into fresh, preallocated files of the segment size with pwrite, the
//     least it costs to store the bytes here (catch-up);
//   - load: a second, independent store in the child takes 128 B Puts
//     while the parent measures its unreplicated rate (async): what two
//     stores on the two cores reach;
//   - replecho: the sync path's shape without a store: senders hand a
//     payload to one sender goroutine that writes a frame, the child reads
//     it, copies it into a buffer and answers an 8-byte ack, one ack reader
//     releases the waiters (sync).

// probeSegment is the size of the filesink's files: the benchmarks'
// segment size.
const probeSegment = 64 << 20

// childProbes starts the filesink, load and replecho listeners in the
// child; dir is where the filesink and the load store write.
func childProbes(t *testing.T, wg *sync.WaitGroup, dir string) []net.Listener {
	var n atomic.Int64
	fresh := func(what string) string {
		return filepath.Join(dir, what+"-"+time.Now().Format("150405.000000")+"-"+string(rune('a'+n.Add(1)%26)))
	}
	return []net.Listener{
		probeListener(t, wg, func(c net.Conn) { fileSink(t, c, fresh("filesink")) }),
		probeListener(t, wg, func(c net.Conn) { loadStore(t, c, fresh("load")) }),
		probeListener(t, wg, replEcho),
	}
}

// fileSink writes what c sends into files of probeSegment bytes under
// dir, each preallocated and written with pwrite, then answers one byte
// and removes them.
func fileSink(t *testing.T, c net.Conn, dir string) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		childFail(t, "filesink: %v", err)
	}
	defer os.RemoveAll(dir)
	buf := make([]byte, 256<<10)
	var f *os.File
	var pos int64 = probeSegment
	for i := 0; ; {
		n, err := c.Read(buf)
		for b := buf[:n]; len(b) > 0; {
			if pos == probeSegment {
				if f != nil {
					f.Close()
				}
				if f, err = os.OpenFile(filepath.Join(dir, segmentFileName(i)), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
					childFail(t, "filesink: %v", err)
				}
				if err := unix.Fallocate(int(f.Fd()), 0, 0, probeSegment); err != nil {
					childFail(t, "filesink: fallocate: %v", err)
				}
				i, pos = i+1, 0
			}
			k := min(int64(len(b)), probeSegment-pos)
			if _, err := f.WriteAt(b[:k], pos); err != nil {
				childFail(t, "filesink: %v", err)
			}
			b, pos = b[k:], pos+k
		}
		if err != nil {
			break
		}
	}
	if f != nil {
		f.Close()
	}
	c.Write([]byte{1})
}

func segmentFileName(i int) string {
	return "seg-" + string(rune('a'+i/26%26)) + string(rune('a'+i%26))
}

// loadStore opens a store in dir, answers a byte once open, puts 128 B
// messages until c sends anything or closes, then answers how many (8
// bytes) and closes and removes the store.
func loadStore(t *testing.T, c net.Conn, dir string) {
	s, err := Open(dir, &Options{SegmentSize: 64 << 20})
	if err != nil {
		childFail(t, "load: %v", err)
	}
	defer os.RemoveAll(dir)
	var stop atomic.Bool
	go func() {
		var one [1]byte
		c.Read(one[:])
		stop.Store(true)
	}()
	c.Write([]byte{1})
	ctx := context.Background()
	body := make([]byte, 128)
	var n uint64
	for ; !stop.Load(); n++ {
		if _, err := s.Put(ctx, &Message{Topic: "bench", Body: body}, 0); err != nil {
			childFail(t, "load: put: %v", err)
		}
	}
	if err := s.Close(); err != nil {
		childFail(t, "load: close: %v", err)
	}
	c.Write(binary.LittleEndian.AppendUint64(nil, n))
}

// replEcho reads frames (an 8-byte length, then the body) from c, copies
// each body into a buffer and, once nothing more has arrived, answers the
// total of bytes received (8 bytes): the replica's loop without a store.
func replEcho(c net.Conn) {
	br := bufio.NewReaderSize(c, 256<<10)
	var h [8]byte
	var buf []byte
	var total uint64
	for {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return
		}
		n := int(binary.LittleEndian.Uint64(h[:]))
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		if _, err := io.ReadFull(br, buf[:n]); err != nil {
			return
		}
		total += uint64(n)
		if br.Buffered() > 0 {
			continue
		}
		if _, err := c.Write(binary.LittleEndian.AppendUint64(h[:0], total)); err != nil {
			return
		}
	}
}

// fileCopyTime is copyTime into the child's filesink.
func (r *remote) fileCopyTime(n int64) time.Duration {
	return r.copyTo(r.filesink, n)
}

// withLoad runs fn while a second store in the child takes 128 B Puts,
// and returns fn's duration and the child's Puts per second meanwhile.
func (r *remote) withLoad(fn func() time.Duration) (time.Duration, float64) {
	conn, err := net.Dial("tcp", r.load)
	if err != nil {
		r.b.Fatal(err)
	}
	defer conn.Close()
	var one [1]byte
	if _, err := io.ReadFull(conn, one[:]); err != nil { // the store is open
		r.b.Fatal(err)
	}
	t0 := time.Now()
	took := fn()
	if _, err := conn.Write(one[:]); err != nil {
		r.b.Fatal(err)
	}
	var cnt [8]byte
	if _, err := io.ReadFull(conn, cnt[:]); err != nil {
		r.b.Fatal(err)
	}
	return took, float64(binary.LittleEndian.Uint64(cnt[:])) / time.Since(t0).Seconds()
}

// echoGroup is the primary's side of the replecho probe.
type echoGroup struct {
	conn    net.Conn
	mu      sync.Mutex
	pending []byte // payloads handed in, not yet sent
	end     uint64 // bytes handed in so far
	kick    chan struct{}
	acked   atomic.Uint64
	ackMu   sync.Mutex
	ackCh   chan struct{} // closed at each ack
	acks    atomic.Int64
	done    chan struct{}
}

// replEchoLatency runs the replecho probe: senders goroutines send n
// payloads of size bytes in all, each waiting for the ack that covers it;
// it returns the sorted latencies and payloads per ack.
func (r *remote) replEchoLatency(senders, n, size int) ([]time.Duration, float64) {
	conn, err := net.Dial("tcp", r.replecho)
	if err != nil {
		r.b.Fatal(err)
	}
	g := &echoGroup{conn: conn, kick: make(chan struct{}, 1), ackCh: make(chan struct{}), done: make(chan struct{})}
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); g.send() }()
	go func() { defer bg.Done(); g.readAcks() }()
	lat := make([][]time.Duration, senders)
	body := make([]byte, size)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < n; i += senders {
				t := time.Now()
				g.put(body)
				lat[s] = append(lat[s], time.Since(t))
			}
		}()
	}
	wg.Wait()
	close(g.done)
	conn.Close()
	bg.Wait()
	all := slices.Concat(lat...)
	slices.Sort(all)
	return all, float64(n) / float64(max(g.acks.Load(), 1))
}

// put hands b to the sender and waits for the ack that covers it.
func (g *echoGroup) put(b []byte) {
	g.mu.Lock()
	g.pending = append(g.pending, b...)
	g.end += uint64(len(b))
	end := g.end
	g.mu.Unlock()
	select {
	case g.kick <- struct{}{}:
	default:
	}
	for {
		g.ackMu.Lock()
		ch := g.ackCh
		g.ackMu.Unlock()
		if g.acked.Load() >= end {
			return
		}
		select {
		case <-ch:
		case <-g.done:
			return
		}
	}
}

// send writes what the senders handed in, one frame a wake-up, as the
// primary's stream does (a yield after the wake first).
func (g *echoGroup) send() {
	var frame []byte
	for {
		select {
		case <-g.kick:
		case <-g.done:
			return
		}
		runtime.Gosched()
		g.mu.Lock()
		frame = binary.LittleEndian.AppendUint64(frame[:0], uint64(len(g.pending)))
		frame = append(frame, g.pending...)
		g.pending = g.pending[:0]
		g.mu.Unlock()
		if _, err := g.conn.Write(frame); err != nil {
			return
		}
	}
}

// readAcks releases the waiters at each ack.
func (g *echoGroup) readAcks() {
	var b [8]byte
	for {
		if _, err := io.ReadFull(g.conn, b[:]); err != nil {
			return
		}
		g.acked.Store(binary.LittleEndian.Uint64(b[:]))
		g.acks.Add(1)
		g.ackMu.Lock()
		close(g.ackCh)
		g.ackCh = make(chan struct{})
		g.ackMu.Unlock()
	}
}

// segCopyTime is a plain TCP copy of the same bytes the catch-up sends:
// the first n bytes of p's CommitLog, read from its segment files through
// the page cache (pread into one reused 256 KiB buffer) and written to the
// child's sink, until the sink has read them all.
func (r *remote) segCopyTime(p *Store, n int64) time.Duration {
	dir := p.path("commitlog")
	seg := p.opts.SegmentSize
	conn, err := net.Dial("tcp", r.sink)
	if err != nil {
		r.b.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 256<<10)
	t := time.Now()
	for start := int64(0); start < n; start += seg {
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("%020d", start)))
		if err != nil {
			r.b.Fatal(err)
		}
		for pos, end := int64(0), min(seg, n-start); pos < end; {
			k, err := f.ReadAt(buf[:min(int64(len(buf)), end-pos)], pos)
			if k == 0 && err != nil {
				r.b.Fatal(err)
			}
			if _, err := conn.Write(buf[:k]); err != nil {
				r.b.Fatal(err)
			}
			pos += int64(k)
		}
		f.Close()
	}
	r.copyDone(conn)
	return time.Since(t)
}

// procFaults is the minor page faults a process took so far, from /proc.
func procFaults(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	v, err := strconv.ParseInt(f[7], 10, 64) // minflt (field 10)
	if err != nil {
		b.Fatal(err)
	}
	return v
}
