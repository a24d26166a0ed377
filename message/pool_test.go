package message

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// poolPayloads encodes n messages cycling through the seeds (plus one
// larger than a block), each with its own queue offset.
func poolPayloads(n int) [][]byte {
	seeds := append(seedMessages(), &Message{Topic: "big", Body: bytes.Repeat([]byte{7}, blockBytes+100), Tags: "big"})
	out := make([][]byte, n)
	for i := range out {
		out[i] = encodeForTest(seeds[i%len(seeds)], &Meta{QueueOffset: int64(i), Uniq: []byte("0123456789ABCDEF0123456789ABCDEF")})
	}
	return out
}

func decodeAll(t testing.TB, b *Batch, payloads [][]byte) []*MessageExt {
	t.Helper()
	out := make([]*MessageExt, len(payloads))
	for i, p := range payloads {
		ext, err := b.DecodeAt(p, int64(1000*i))
		if err != nil {
			t.Fatalf("payload %d: %v", i, err)
		}
		out[i] = ext
	}
	return out
}

func checkDecoded(t testing.TB, payloads [][]byte, got []*MessageExt, which func(i int) bool) {
	t.Helper()
	for i, ext := range got {
		if !which(i) {
			continue
		}
		var want MessageExt
		if err := DecodeAt(payloads[i], int64(1000*i), &want); err != nil {
			t.Fatal(err)
		}
		if !sameMessage(&want, ext) || want.MsgID != ext.MsgID {
			t.Fatalf("message %d changed:\n%+v\n%+v", i, want, *ext)
		}
	}
}

// TestPoolKeepsUnreleasedMessages: releasing every other message and
// decoding as many again never touches the messages still held, and the
// new ones decode right.
func TestPoolKeepsUnreleasedMessages(t *testing.T) {
	var p Pool
	payloads := poolPayloads(4 * extsPerBlock)
	b := p.Get()
	first := decodeAll(t, b, payloads)
	for i, ext := range first {
		if ext.blk == nil {
			t.Fatalf("message %d holds no block", i)
		}
		if i%2 == 1 {
			Release(ext)
		}
	}
	second := decodeAll(t, b, payloads)
	checkDecoded(t, payloads, first, func(i int) bool { return i%2 == 0 })
	checkDecoded(t, payloads, second, func(int) bool { return true })
	p.Put(b)
}

// TestPoolRecycles: decoding and releasing a block's worth of messages
// over and over allocates nothing once the blocks exist (without
// recycling each round needs two blocks, so this fails). The messages
// have no keys and no user properties, which allocate per message.
func TestPoolRecycles(t *testing.T) {
	var p Pool
	payloads := make([][]byte, 4*extsPerBlock+10) // over 4 blocks a round
	for i := range payloads {
		payloads[i] = encodeForTest(&Message{Topic: "t", Tags: "a", Body: make([]byte, 128), ShardingKey: "s"},
			&Meta{QueueOffset: int64(i), Uniq: []byte("0123456789ABCDEF0123456789ABCDEF")})
	}
	b := p.Get()
	defer p.Put(b)
	msgs := make([]*MessageExt, len(payloads))
	allocs := testing.AllocsPerRun(200, func() {
		for i, pl := range payloads {
			ext, err := b.DecodeAt(pl, int64(i))
			if err != nil {
				t.Fatal(err)
			}
			msgs[i] = ext
		}
		for _, m := range msgs {
			Release(m)
		}
	})
	// Without recycling a round takes over 4 blocks of 3 allocations each.
	limit := 0.5
	if raceEnabled {
		limit = 4
	}
	if allocs > limit {
		t.Fatalf("%.1f allocations per round of %d messages, want at most %.1f", allocs, len(payloads), limit)
	}
}

// TestReleaseAndClone: Release is a no-op for messages not from a pool
// and for a second release through the same pointer; a Clone survives
// its original's release and the reuse of its memory.
func TestReleaseAndClone(t *testing.T) {
	var plain MessageExt
	payloads := poolPayloads(2 * extsPerBlock)
	if err := DecodeAt(payloads[1], 1000, &plain); err != nil {
		t.Fatal(err)
	}
	Release(&plain)
	var p Pool
	b := p.Get()
	msgs := decodeAll(t, b, payloads)
	clones := make([]*MessageExt, len(msgs))
	for i, m := range msgs {
		clones[i] = m.Clone()
		if clones[i].blk != nil {
			t.Fatal("a clone holds a pool block")
		}
		if len(m.Body) > 0 && &clones[i].Body[0] == &m.Body[0] {
			t.Fatal("a clone shares its body")
		}
	}
	for _, m := range msgs {
		Release(m)
		Release(m) // no-op: the pointer no longer holds its block
	}
	// Overwrite the released memory with other messages.
	other := make([][]byte, len(payloads))
	for i := range other {
		other[i] = encodeForTest(&Message{Topic: strings.Repeat("z", 20), Tags: "zz", Body: bytes.Repeat([]byte{9}, 40),
			Properties: map[string]string{"zzz": "9"}}, &Meta{QueueOffset: 77})
	}
	decodeAll(t, b, other)
	checkDecoded(t, payloads, clones, func(int) bool { return true })
	p.Put(b)
}

// TestPoolAcrossGoroutines: one goroutine decodes, another checks and
// releases, as a consumer's fetcher and workers do (run with -race).
func TestPoolAcrossGoroutines(t *testing.T) {
	var p Pool
	payloads := poolPayloads(3 * extsPerBlock)
	ch := make(chan []*MessageExt, 4)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for msgs := range ch {
			checkDecoded(t, payloads, msgs, func(int) bool { return true })
			for _, m := range msgs {
				Release(m)
			}
		}
	}()
	b := p.Get()
	for range 20 {
		ch <- decodeAll(t, b, payloads)
	}
	close(ch)
	wg.Wait()
	p.Put(b)
}
