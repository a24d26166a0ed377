package consumer

import (
	"math/rand/v2"
	"testing"

	"github.com/mqlite/mqlite/message"
)

// TestTrackerMatchesModel drives the tracker (the lowest-unacked offset a
// concurrent push queue commits) with random fetches (offsets increasing,
// with gaps as filters leave them) and random acks (runs in order, parts
// of runs, offsets out of order, repeats, offsets never fetched) and
// compares front, span and the live count with a plain set after every
// step.
func TestTrackerMatchesModel(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 7))
		var tr tracker
		pending := map[int64]bool{} // fetched, not acked
		var fetched []int64
		next := int64(0)
		check := func(step int) {
			t.Helper()
			if tr.live != len(pending) {
				t.Fatalf("seed %d step %d: live %d, want %d", seed, step, tr.live, len(pending))
			}
			lo, hi, any := int64(0), int64(0), false
			for off := range pending {
				if !any || off < lo {
					lo = off
				}
				if !any || off > hi {
					hi = off
				}
				any = true
			}
			f, ok := tr.front()
			if ok != any || (any && f != lo) {
				t.Fatalf("seed %d step %d: front %d %v, want %d %v", seed, step, f, ok, lo, any)
			}
			if sp, ok := tr.span(); any && ok && sp < hi-lo {
				t.Fatalf("seed %d step %d: span %d below the pending range %d", seed, step, sp, hi-lo)
			}
		}
		for step := range 400 {
			switch r.IntN(4) {
			case 0: // fetch a batch
				for range 1 + r.IntN(40) {
					next += 1 + int64(r.IntN(3))
					tr.push(next)
					pending[next] = true
					fetched = append(fetched, next)
				}
			case 1, 2: // ack consecutive fetched offsets
				if len(fetched) == 0 {
					continue
				}
				i := r.IntN(len(fetched))
				j := min(len(fetched), i+1+r.IntN(40))
				var msgs []*message.MessageExt
				for _, off := range fetched[i:j] {
					if r.IntN(8) != 0 { // parts of batches too
						msgs = append(msgs, &message.MessageExt{QueueOffset: off})
					}
				}
				for _, m := range msgs {
					tr.ack(m.QueueOffset)
					delete(pending, m.QueueOffset)
				}
			case 3: // out of order, repeated and unknown offsets
				var msgs []*message.MessageExt
				for range 1 + r.IntN(5) {
					off := next + 100
					if len(fetched) > 0 && r.IntN(4) != 0 {
						off = fetched[r.IntN(len(fetched))]
					}
					msgs = append(msgs, &message.MessageExt{QueueOffset: off})
				}
				for _, m := range msgs {
					tr.ack(m.QueueOffset)
					delete(pending, m.QueueOffset)
				}
			}
			check(step)
		}
	}
}
