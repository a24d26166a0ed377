package bench

import (
	"context"
	"errors"
	"runtime"
	"sync"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/message"
)

// decodeFloorBytes is how many bytes of raw records the decode floor
// holds: the default ConsumerOptions.ReadAheadBytes, so that its live heap
// (and with it how often the collector runs) is what a consumer's
// read-ahead gives a backlog drain.
const decodeFloorBytes = 8 << 20

// decodeFloor is the consume rows' probe: the records of queue 0 as the
// store wrote them (their payloads, copied out once, untimed, up to
// decodeFloorBytes and then repeated), decoded by Count into one
// MessageExt each the way the store hands them to a consumer
// (message.Batch: messages carved from shared blocks, each independent,
// collected when dropped). No store call, no consumer, no goroutine: what
// the API's message costs at least.
type decodeFloor struct {
	buf   []byte  // the payloads, one after another
	ends  []int   // payload i is buf[ends[i-1]:ends[i]]
	offs  []int64 // their CommitLog offsets
	next  int
	batch message.Batch
}

// loadDecodeFloor copies the payloads of queue 0's first records; nil if
// the queue is empty (the backlog has not been written yet).
func loadDecodeFloor(s *mqlite.Store) (*decodeFloor, error) {
	f := &decodeFloor{buf: make([]byte, 0, decodeFloorBytes)}
	ctx := context.Background()
	for from := int64(0); ; {
		n, err := s.MaxOffset(mqliteTopic, 0)
		if err != nil || from >= n {
			break
		}
		ms, err := s.ReadQueue(ctx, mqliteTopic, 0, from, 1024)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			full := false
			err := s.View(m.CommitLogOffset, func(v mqlite.MessageView) error {
				if len(v) > cap(f.buf)-len(f.buf) {
					full = true
					return nil
				}
				f.buf = append(f.buf, v...)
				f.ends = append(f.ends, len(f.buf))
				f.offs = append(f.offs, m.CommitLogOffset)
				return nil
			})
			if err != nil {
				return nil, err
			}
			if full {
				return f, nil
			}
		}
		from += int64(len(ms))
	}
	if len(f.ends) == 0 {
		return nil, nil
	}
	return f, nil
}

// decodeOne decodes the next record (cycling through those loaded).
func (f *decodeFloor) decodeOne() (*mqlite.MessageExt, error) {
	i := f.next % len(f.ends)
	start := 0
	if i > 0 {
		start = f.ends[i-1]
	}
	m, err := f.batch.DecodeAt(f.buf[start:f.ends[i]], f.offs[i])
	if err != nil {
		return nil, err
	}
	m.CommitLogOffset = f.offs[i]
	f.next++
	return m, nil
}

// Count decodes n records into new messages, dropping each at once as a
// handler that counts would, and returns their number and body bytes.
func (f *decodeFloor) Count(ctx context.Context, n int64) (msgs, bytes int64, err error) {
	for ; msgs < n; msgs++ {
		if msgs%4096 == 0 && ctx.Err() != nil {
			return msgs, bytes, ctx.Err()
		}
		m, err := f.decodeOne()
		if err != nil {
			return msgs, bytes, err
		}
		bytes += int64(len(m.Body))
	}
	return msgs, bytes, nil
}

// Next is unused (the row calls Count); it decodes one record.
func (f *decodeFloor) Next(_ context.Context, dst [][]byte) ([][]byte, error) {
	m, err := f.decodeOne()
	if err != nil {
		return dst, err
	}
	return append(dst, m.Body), nil
}

func (f *decodeFloor) Close() error { return nil }

// decodeFloorParallel is the decode floor on every processor: GOMAXPROCS
// goroutines decode as the decode floor does, each its share of the count
// into a Batch of its own, starting at its own record. Set against the
// one-goroutine row, it says how far decoding into new messages (the
// allocation, the collector) gains from more processors: a consumer
// spreads its decoding over them.
type decodeFloorParallel struct{ f *decodeFloor }

// Count decodes n records over GOMAXPROCS goroutines and returns their
// number and body bytes.
func (p decodeFloorParallel) Count(ctx context.Context, n int64) (msgs, bytes int64, err error) {
	procs := int64(runtime.GOMAXPROCS(0))
	type share struct {
		msgs, bytes int64
		err         error
	}
	out := make([]share, procs)
	var wg sync.WaitGroup
	for g := range procs {
		c := &decodeFloor{buf: p.f.buf, ends: p.f.ends, offs: p.f.offs, next: int(g) * len(p.f.ends) / int(procs)}
		k := n / procs
		if g < n%procs {
			k++
		}
		wg.Go(func() {
			s := &out[g]
			s.msgs, s.bytes, s.err = c.Count(ctx, k)
		})
	}
	wg.Wait()
	for _, s := range out {
		msgs, bytes, err = msgs+s.msgs, bytes+s.bytes, errors.Join(err, s.err)
	}
	return msgs, bytes, err
}

// Next is unused (the row calls Count); it decodes one record.
func (p decodeFloorParallel) Next(ctx context.Context, dst [][]byte) ([][]byte, error) {
	return p.f.Next(ctx, dst)
}

func (p decodeFloorParallel) Close() error { return nil }
