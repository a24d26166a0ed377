package producer_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/producer"
)

// picks returns the first n round-robin queues of a Picker over 8 queues
// for each of a few topics.
func picks(t *testing.T, p *producer.Picker, n int) []int {
	t.Helper()
	var out []int
	for _, topic := range []string{"a", "b", "orders", "payments"} {
		for range n {
			q, err := p.Pick(&message.Message{Topic: topic}, 8)
			require.NoError(t, err)
			out = append(out, q)
		}
	}
	return out
}

// TestPickerSeed: pickers with the same Seed choose the same queues, topic
// by topic; another seed starts elsewhere; the round robin still visits
// every queue in turn.
func TestPickerSeed(t *testing.T) {
	a := picks(t, &producer.Picker{Seed: 7}, 9)
	require.Equal(t, a, picks(t, &producer.Picker{Seed: 7}, 9))
	for i := 0; i < len(a); i += 9 {
		for j := 1; j < 9; j++ {
			require.Equal(t, (a[i+j-1]+1)%8, a[i+j], "round robin at pick %d", i+j)
		}
	}
	differ := 0
	for seed := uint64(8); seed < 16; seed++ {
		if fmt.Sprint(picks(t, &producer.Picker{Seed: seed}, 1)) != fmt.Sprint(picks(t, &producer.Picker{Seed: 7}, 1)) {
			differ++
		}
	}
	require.Positive(t, differ, "the seed does not move the starts")
	// A sharding key and a Selector still win over the seed.
	q, err := (&producer.Picker{Seed: 7}).Pick(&message.Message{Topic: "a", ShardingKey: "k"}, 8)
	require.NoError(t, err)
	require.Equal(t, producer.ShardingQueue("k", 8), q)
	q, err = (&producer.Picker{Seed: 7, Selector: func(*message.Message, int) int { return 5 }}).Pick(&message.Message{Topic: "a"}, 8)
	require.NoError(t, err)
	require.Equal(t, 5, q)
}
