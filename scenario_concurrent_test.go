package mqlite

// S26 of the reliability plan: concurrent producers and consumers under
// -race. Eight producers, two each sending one at a time (Send), in
// batches (SendBatch), asynchronously (SendAsync) and with Store.Put,
// spread their messages (6 B to 64 KiB) over four queues while four pull
// consumers, each in a group of its own, read everything; 64 KiB segments
// make rolls race with appends, and the dispatcher runs throughout.

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var s26Each = flag.Int("s26.each", 400, "messages per producer in TestConcurrentProducersAndConsumers")

const (
	s26Producers = 8
	s26Queues    = 4
	s26Consumers = 4
)

// s26Body is producer p's message seq for queue q: a header naming them,
// then bytes derived from it, so that any change shows.
func s26Body(p, q, seq, size int) []byte {
	b := make([]byte, max(size, 6))
	b[0], b[1] = byte(p), byte(q)
	binary.LittleEndian.PutUint32(b[2:], uint32(seq))
	for i := 6; i < len(b); i++ {
		b[i] = byte(p*31 + seq*7 + i)
	}
	return b
}

func s26Size(rng *rand.Rand) int {
	switch r := rng.IntN(100); {
	case r == 0:
		return rng.IntN(64 << 10)
	case r < 10:
		return rng.IntN(4 << 10)
	default:
		return rng.IntN(256)
	}
}

// s26Sent is one acknowledged message.
type s26Sent struct {
	p, seq int
	res    PutResult
	body   []byte
}

func TestConcurrentProducersAndConsumers(t *testing.T) {
	each := *s26Each
	dir := filepath.Join(t.TempDir(), "s")
	s, err := Open(dir, &Options{SegmentSize: 64 << 10, FlowControlThreshold: -1})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("c", TopicConfig{Queues: s26Queues}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // bounds a failure only
	defer cancel()

	var mu sync.Mutex
	var sent []s26Sent
	record := func(p, seq int, r PutResult, body []byte) {
		mu.Lock()
		sent = append(sent, s26Sent{p, seq, r, body})
		mu.Unlock()
	}
	var producers sync.WaitGroup
	for p := range s26Producers {
		producers.Go(func() {
			rng := rand.New(rand.NewPCG(26, uint64(p)))
			prod, err := s.NewProducer(ProducerOptions{Selector: func(m *Message, n int) int { return int(m.Body[1]) % n }})
			if err != nil {
				t.Error(err)
				return
			}
			defer prod.Close()
			var async sync.WaitGroup
			for seq := 0; seq < each; {
				q := rng.IntN(s26Queues)
				switch p / 2 {
				case 0:
					b := s26Body(p, q, seq, s26Size(rng))
					r, err := prod.Send(ctx, &Message{Topic: "c", Body: b})
					if err != nil {
						t.Error(err)
						return
					}
					record(p, seq, r.PutResult, b)
					seq++
				case 1:
					n := min(1+rng.IntN(8), each-seq)
					batch := make([]*Message, n)
					for i := range batch {
						batch[i] = &Message{Topic: "c", Body: s26Body(p, q, seq+i, rng.IntN(2<<10))}
					}
					rs, err := prod.SendBatch(ctx, batch)
					if err != nil {
						t.Error(err)
						return
					}
					for i, r := range rs {
						record(p, seq+i, r.PutResult, batch[i].Body)
					}
					seq += n
				case 2:
					b, at := s26Body(p, q, seq, s26Size(rng)), seq
					async.Add(1)
					if err := prod.SendAsync(ctx, &Message{Topic: "c", Body: b}, func(r SendResult, err error) {
						defer async.Done()
						if err != nil {
							t.Error(err)
							return
						}
						record(p, at, r.PutResult, b)
					}); err != nil {
						async.Done()
						t.Error(err)
						return
					}
					seq++
				default:
					b := s26Body(p, q, seq, s26Size(rng))
					r, err := s.Put(ctx, &Message{Topic: "c", Body: b}, q)
					if err != nil {
						t.Error(err)
						return
					}
					record(p, seq, r, b)
					seq++
				}
			}
			async.Wait()
		})
	}

	// Each consumer checks what it polls as it goes: per queue, offsets
	// 0, 1, 2, ... and each producer's sequence numbers rising.
	got := make([][s26Queues]int, s26Consumers)
	var consumers sync.WaitGroup
	for c := range s26Consumers {
		consumers.Go(func() {
			pc, err := s.NewPullConsumer(fmt.Sprintf("g%d", c), ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
			if err != nil {
				t.Error(err)
				return
			}
			defer pc.Close()
			if err := pc.Subscribe("c", nil); err != nil {
				t.Error(err)
				return
			}
			var lastSeq [s26Queues][s26Producers]int
			for q := range lastSeq {
				for p := range lastSeq[q] {
					lastSeq[q][p] = -1
				}
			}
			for total := 0; total < s26Producers*each; {
				ms, err := pc.Poll(ctx, 1+c*16)
				if err != nil {
					t.Errorf("consumer %d after %d: %v", c, total, err)
					return
				}
				for _, m := range ms {
					q, p, seq := int(m.QueueID), int(m.Body[0]), int(binary.LittleEndian.Uint32(m.Body[2:]))
					if m.QueueOffset != int64(got[c][q]) {
						t.Errorf("consumer %d queue %d: offset %d, want %d", c, q, m.QueueOffset, got[c][q])
						return
					}
					if int(m.Body[1]) != q || seq <= lastSeq[q][p] || !bytes.Equal(m.Body, s26Body(p, q, seq, len(m.Body))) {
						t.Errorf("consumer %d queue %d offset %d: producer %d seq %d after %d, or damaged", c, q, m.QueueOffset, p, seq, lastSeq[q][p])
						return
					}
					lastSeq[q][p] = seq
					got[c][q]++
					total++
				}
			}
		})
	}
	producers.Wait()
	consumers.Wait()
	require.False(t, t.Failed())

	// Every acknowledged message reads back at its offset; per queue the
	// offsets are 0..n-1, each once; each producer's are in send order.
	require.Len(t, sent, s26Producers*each)
	offsets := [s26Queues]map[int64]bool{}
	last := map[[2]int]int64{} // (producer, queue) -> last queue offset, by seq
	byP := make([][]s26Sent, s26Producers)
	for _, m := range sent {
		byP[m.p] = append(byP[m.p], m)
	}
	for p := range byP {
		require.Len(t, byP[p], each)
		for i, m := range byP[p] { // recorded as acknowledged: in send order, async callbacks too
			require.Equal(t, i, m.seq, "producer %d", p)
			require.Equal(t, m.seq, int(binary.LittleEndian.Uint32(m.body[2:])))
		}
	}
	for _, m := range sent {
		q := int(m.res.QueueID)
		if offsets[q] == nil {
			offsets[q] = map[int64]bool{}
		}
		require.False(t, offsets[q][m.res.QueueOffset], "queue %d offset %d twice", q, m.res.QueueOffset)
		offsets[q][m.res.QueueOffset] = true
		got, err := s.ReadAt(m.res.Offset)
		require.NoError(t, err)
		require.Equal(t, m.body, got.Body)
	}
	for p := range byP {
		for _, m := range byP[p] {
			k := [2]int{p, int(m.res.QueueID)}
			if prev, ok := last[k]; ok && m.res.QueueOffset <= prev {
				require.Failf(t, "out of order", "producer %d queue %d: seq %d at offset %d after %d", p, k[1], m.seq, m.res.QueueOffset, prev)
			}
			last[k] = m.res.QueueOffset
		}
	}
	total := 0
	for q := range offsets {
		for o := range int64(len(offsets[q])) {
			require.True(t, offsets[q][o], "queue %d misses offset %d", q, o)
		}
		total += len(offsets[q])
		for c := range got {
			require.Equal(t, len(offsets[q]), got[c][q], "consumer %d read all of queue %d", c, q)
		}
	}
	require.Equal(t, s26Producers*each, total)
	t.Logf("%d messages over %d queues, %d segments, read by %d consumers", total, s26Queues, len(s.log.Segments()), s26Consumers)
}
