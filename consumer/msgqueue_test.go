package consumer

import (
	"math/rand/v2"
	"testing"

	"github.com/mqlite/mqlite/message"
)

// TestMsgQueueMatchesSlice drives a pq's message FIFO with random adds
// (pulls of 0..40 messages), peeks, pops and drops, against a plain slice:
// the same messages in the same order, and a slice handed out never
// changes afterwards nor grows into the queue's messages.
func TestMsgQueueMatchesSlice(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 3))
		var q msgQueue
		var model []*message.MessageExt
		type handed struct {
			got  []*message.MessageExt
			want []int64
		}
		var out []handed
		next := int64(0)
		for step := range 500 {
			switch r.IntN(3) {
			case 0:
				msgs := make([]*message.MessageExt, r.IntN(41))
				for i := range msgs {
					msgs[i] = &message.MessageExt{QueueOffset: next}
					next++
				}
				q.add(msgs)
				model = append(model, msgs...)
			default:
				if len(model) == 0 {
					continue
				}
				k := 1 + r.IntN(min(len(model), 70))
				var got []*message.MessageExt
				switch r.IntN(3) {
				case 0:
					got = q.peek(k)
				case 1:
					got = q.pop(k)
					model = model[k:]
				case 2:
					got = q.peek(k)
					q.drop(k)
					model = model[k:]
				}
				if len(got) != k || cap(got) != k {
					t.Fatalf("seed %d step %d: got len %d cap %d, want %d", seed, step, len(got), cap(got), k)
				}
				h := handed{got: got}
				for _, m := range got {
					h.want = append(h.want, m.QueueOffset)
				}
				out = append(out, h)
			}
			if q.len() != len(model) {
				t.Fatalf("seed %d step %d: len %d, want %d", seed, step, q.len(), len(model))
			}
			if len(model) > 0 && q.front() != model[0] {
				t.Fatalf("seed %d step %d: front %d, want %d", seed, step, q.front().QueueOffset, model[0].QueueOffset)
			}
			var all []*message.MessageExt
			q.all(func(m *message.MessageExt) { all = append(all, m) })
			for i := range all {
				if all[i] != model[i] {
					t.Fatalf("seed %d step %d: message %d is offset %d, want %d", seed, step, i, all[i].QueueOffset, model[i].QueueOffset)
				}
			}
		}
		for i, h := range out {
			for j, m := range h.got {
				if m.QueueOffset != h.want[j] {
					t.Fatalf("seed %d: handed-out slice %d changed at %d", seed, i, j)
				}
			}
		}
	}
}
