package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"time"
)

// bodyPool hands out bodies of one size from a block of random bytes
// (incompressible, so Pebble's block compression gains nothing), at
// varying offsets, without allocating.
type bodyPool struct {
	buf  []byte
	size int
}

const poolBytes = 4 << 20

func newBodyPool(size int) *bodyPool {
	r := rand.New(rand.NewChaCha8([32]byte{'m', 'q', 'b'}))
	buf := make([]byte, poolBytes+size)
	for i := 0; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], r.Uint64())
	}
	return &bodyPool{buf: buf, size: size}
}

func (p *bodyPool) body(seq int) []byte {
	off := (seq * 4099) % poolBytes
	return p.buf[off : off+p.size : off+p.size]
}

// closeQueue closes q and joins its error into *err.
func closeQueue(q Queue, err *error) {
	*err = errors.Join(*err, q.Close())
}

// runProduce sends j.Count messages from j.Producers goroutines (or as
// many as fit in j.Limit) and times them up to the last ack.
func runProduce(sys System, j Job) (r Result, err error) {
	p := j.Params()
	r.Durability = sys.Durability(p)
	q, err := sys.Open(p)
	if err != nil {
		return r, err
	}
	defer closeQueue(q, &err)
	pool := newBodyPool(j.Size)
	pipe, _ := q.(Pipeliner)
	if j.Mode != Async || p.Batch > 1 {
		pipe = nil
	}
	hists := make([]Hist, p.Producers)
	sent := make([]int64, p.Producers)
	errs := make([]error, p.Producers)
	sc, _ := q.(SyncCounter)
	var syncs0 int64
	if sc != nil {
		syncs0 = sc.Syncs()
	}
	gc0 := gcCycles()
	start := time.Now()
	deadline := start.Add(j.Limit)
	var wg sync.WaitGroup
	for g := range p.Producers {
		share := j.Count / p.Producers
		if g < j.Count%p.Producers {
			share++
		}
		wg.Go(func() {
			bodies := make([][]byte, p.Batch)
			seq := g * 1_000_003
			for sent[g] < int64(share) {
				k := min(p.Batch, share-int(sent[g]))
				for i := range k {
					bodies[i] = pool.body(seq)
					seq++
				}
				t0 := time.Now()
				if j.Limit > 0 && t0.After(deadline) {
					return
				}
				if pipe != nil {
					errs[g] = pipe.SendAsync(g, bodies[0], &hists[g])
				} else {
					errs[g] = q.Send(g, bodies[:k])
					hists[g].Record(time.Since(t0))
				}
				if errs[g] != nil {
					return
				}
				sent[g] += int64(k)
			}
		})
	}
	wg.Wait()
	if pipe != nil {
		errs = append(errs, pipe.Drain())
	}
	r.Seconds = time.Since(start).Seconds()
	r.GCs = gcCycles() - gc0
	if sc != nil {
		r.Syncs = sc.Syncs() - syncs0
	}
	if err := errors.Join(errs...); err != nil {
		return r, err
	}
	var h Hist
	for g := range hists {
		h.Merge(&hists[g])
		r.Msgs += sent[g]
	}
	r.Bytes = r.Msgs * int64(j.Size)
	r.P50, r.P99, r.Max = h.Quantile(0.5), h.Quantile(0.99), time.Duration(h.max)
	return r, nil
}

// runConsumeWrite is the first half of a consume row, in a child of its
// own: it writes a backlog of j.Count messages (async, in batches of
// j.Batch), closes the store and leaves a marker beside j.Dir (backlogDone)
// for the reader.
func runConsumeWrite(sys System, j Job) error {
	q, err := sys.Open(j.Params())
	if err != nil {
		return err
	}
	pool := newBodyPool(j.Size)
	bodies := make([][]byte, j.Params().Batch)
	for n := 0; n < j.Count; {
		k := min(len(bodies), j.Count-n)
		for i := range k {
			bodies[i] = pool.body(n + i)
		}
		if err := q.Send(0, bodies[:k]); err != nil {
			q.Close()
			return fmt.Errorf("writing the backlog: %w", err)
		}
		n += k
	}
	if err := q.Close(); err != nil {
		return err
	}
	return os.WriteFile(backlogDone(j), nil, 0o644)
}

// backlogDone is the marker runConsumeWrite leaves once the backlog in
// j.Dir is complete and closed.
func backlogDone(j Job) string { return j.Dir + ".backlog" }

// runConsume is the second half of a consume row, in a new process (the
// runner starts it once runConsumeWrite's child has ended, so that no row
// reads with a heap its writes warmed): it opens the store with the
// backlog and times one consumer (j.Reader's) reading all of it: by Next,
// or for a Counter (a push consumer) by Count.
func runConsume(sys System, j Job) (r Result, err error) {
	if _, err := os.Stat(backlogDone(j)); err != nil {
		return r, fmt.Errorf("no backlog written in %s: %w", j.Dir, err)
	}
	p := j.Params()
	r.Durability = "backlog: " + sys.Durability(p) + "; then reopened in a new process, one consumer"
	p.Batch = 1
	q, err := sys.Open(p)
	if err != nil {
		return r, err
	}
	defer closeQueue(q, &err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gc0 := gcCycles()
	start := time.Now()
	c, err := q.NewConsumer()
	if err != nil {
		return r, err
	}
	if cn, ok := c.(Counter); ok {
		r.Msgs, r.Bytes, err = cn.Count(ctx, int64(j.Count))
		if err != nil {
			c.Close()
			return r, fmt.Errorf("after %d messages: %w", r.Msgs, err)
		}
	}
	var dst [][]byte
	for r.Msgs < int64(j.Count) {
		if dst, err = c.Next(ctx, dst[:0]); err != nil {
			c.Close()
			return r, fmt.Errorf("after %d messages: %w", r.Msgs, err)
		}
		for _, b := range dst {
			r.Bytes += int64(len(b))
		}
		r.Msgs += int64(len(dst))
		clear(dst)
	}
	r.Seconds = time.Since(start).Seconds()
	r.GCs = gcCycles() - gc0
	if r.Msgs != int64(j.Count) || r.Bytes != int64(j.Count)*int64(j.Size) {
		err = fmt.Errorf("read %d messages, %d bytes; want %d, %d", r.Msgs, r.Bytes, j.Count, j.Count*j.Size)
	}
	return r, errors.Join(err, c.Close())
}

// epoch is the zero of the timestamps written into latency bodies.
var epoch = time.Now()

func stamp(b []byte) { binary.LittleEndian.PutUint64(b, uint64(time.Since(epoch))) }

func stamped(b []byte) time.Duration {
	return time.Since(epoch) - time.Duration(binary.LittleEndian.Uint64(b))
}

// runLatency sends j.Rate messages per second for j.Limit from one
// producer (each stamped with the time its send call began) while one
// consumer receives them, and records send-to-delivery latency.
func runLatency(sys System, j Job) (r Result, err error) {
	p := j.Params()
	r.Durability = sys.Durability(p)
	q, err := sys.Open(p)
	if err != nil {
		return r, err
	}
	defer closeQueue(q, &err)
	total := max(int(float64(j.Rate)*j.Limit.Seconds()), 1)
	c, err := q.NewConsumer()
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.Limit+time.Minute)
	defer cancel()
	var h Hist
	consumed := make(chan error, 1)
	go func() {
		var dst [][]byte
		var err error
		for got := 0; got < total && err == nil; got += len(dst) {
			if dst, err = c.Next(ctx, dst[:0]); err == nil {
				for _, b := range dst {
					h.Record(stamped(b))
				}
			}
		}
		consumed <- err
	}()

	pipe, _ := q.(Pipeliner)
	if j.Mode != Async {
		pipe = nil
	}
	var acks Hist
	// A ring of bodies larger than any pipeline window, so a body is
	// never rewritten while a pipelined send may still read it.
	pool := newBodyPool(j.Size)
	ring := make([][]byte, 8192)
	for i := range ring {
		ring[i] = append([]byte(nil), pool.body(i)...)
	}
	interval := time.Second / time.Duration(max(j.Rate, 1))
	start := time.Now()
	var sendErr error
	for i := 0; i < total && sendErr == nil; i++ {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		b := ring[i%len(ring)]
		stamp(b)
		if pipe != nil {
			sendErr = pipe.SendAsync(0, b, &acks)
		} else {
			sendErr = q.Send(0, [][]byte{b})
		}
	}
	if pipe != nil {
		sendErr = errors.Join(sendErr, pipe.Drain())
	}
	r.Seconds = time.Since(start).Seconds()
	if sendErr != nil {
		cancel()
	}
	err = errors.Join(sendErr, <-consumed, c.Close())
	r.Msgs = int64(total)
	r.Bytes = r.Msgs * int64(j.Size)
	r.P50, r.P99, r.Max = h.Quantile(0.5), h.Quantile(0.99), time.Duration(h.max)
	return r, err
}

// gcCycles is the number of garbage collections this process has
// completed: every system runs in the child's process, so the difference
// over a row's timed part is what that row cost the collector.
func gcCycles() int64 {
	var st runtime.MemStats
	runtime.ReadMemStats(&st)
	return int64(st.NumGC)
}
