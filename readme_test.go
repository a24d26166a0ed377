package mqlite_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/stretchr/testify/require"
)

// readmeTour holds the README's tour, line for line (TestReadmeTour
// checks that the two agree), so the README's code compiles against the
// API and runs.
func readmeTour(ctx context.Context, dir string, check func(error)) {
	// README:begin
	s, err := mqlite.Open(dir, &mqlite.Options{Flush: mqlite.FlushSync}) // nil options: the defaults
	check(err)                                                           // check: your error handling
	defer s.Close()
	check(s.CreateTopic("orders", mqlite.TopicConfig{Queues: 8})) // or let the first send create it (4 queues)

	p, err := s.NewProducer(mqlite.ProducerOptions{})
	check(err)
	res, err := p.Send(ctx, &mqlite.Message{Topic: "orders", Tags: "created", Keys: []string{"o-42"},
		ShardingKey: "o-42",     // same key -> same queue -> in order
		DedupID:     "o-42/new", // sent again within 2 min: stored once, the first result returned
		Body:        []byte(`{"amount": 120}`)})
	check(err)
	check(p.SendAsync(ctx, &mqlite.Message{Topic: "orders", Body: []byte("b")},
		func(res mqlite.SendResult, err error) { /* called once stored */ })) // bounded in flight
	_, err = p.SendBatch(ctx, []*mqlite.Message{ // one append, one sync
		{Topic: "orders", Tags: "paid", Body: []byte("c")}, {Topic: "orders", Body: []byte("d")}})
	check(err)

	f, err := mqlite.Tag("created || paid") // or mqlite.SQL("amount > 100")
	check(err)
	c, err := s.NewPushConsumer("billing", mqlite.ConsumerOptions{Model: mqlite.Clustering})
	check(err)
	check(c.Subscribe("orders", f))
	check(c.Start(func(ctx context.Context, msgs []*mqlite.MessageExt) mqlite.ConsumeResult {
		return mqlite.ConsumeSuccess // or ReconsumeLater: retried after 10s, 30s, 1m, ... then %DLQ%billing
	}))
	defer c.Shutdown(ctx) // drains handlers, commits offsets

	pc, err := s.NewPullConsumer("audit", mqlite.ConsumerOptions{
		ConsumeFromWhere: mqlite.ConsumeFromFirstOffset}) // a new group starts at the end by default
	check(err)
	check(pc.Subscribe("orders", nil))
	msgs, err := pc.Poll(ctx, 32) // long poll: woken by the dispatcher, no polling interval
	check(err)
	check(pc.Commit()) // what Poll returned is done

	_, err = p.Send(ctx, &mqlite.Message{Topic: "orders", Body: []byte("later"),
		DelayLevel: 3}) // 10 s later (RocketMQ's 18 levels); or DeliverAt: any time up to 3 days
	check(err)

	tp, err := s.NewTransactionProducer(func(ctx context.Context, m *mqlite.MessageExt) mqlite.TxState {
		return mqlite.CommitMessage // the check-back for a transaction left unknown
	}, mqlite.TransactionOptions{})
	check(err)
	_, err = tp.SendInTransaction(ctx, &mqlite.Message{Topic: "orders", Body: []byte("tx")},
		func(ctx context.Context, m *mqlite.Message) mqlite.TxState {
			return mqlite.CommitMessage // or RollbackMessage, or TxUnknown: the checker decides later
		})
	check(err)

	m, err := s.MessageByID(res.ID()) // O(1): the ID encodes the CommitLog offset
	check(err)
	check(s.WaitVisible(ctx)) // everything sent so far is indexed
	hits, err := s.MessagesByKey("orders", "o-42", time.Time{}, time.Now(), 16)
	check(err)
	dead, err := s.DeadLetters("billing", 0, 100) // then s.Redrive(ctx, "billing", id): back to its topic
	check(err)
	_, _, _, _ = msgs, m, hits, dead
	// README:end
}

func TestReadmeTour(t *testing.T) {
	src, err := os.ReadFile("readme_test.go")
	require.NoError(t, err)
	_, code, ok := strings.Cut(string(src), "\t// README:"+"begin\n")
	require.True(t, ok)
	code, _, ok = strings.Cut(code, "\t// README:"+"end\n")
	require.True(t, ok)
	code = strings.ReplaceAll("\n"+code, "\n\t", "\n")[1:]

	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, block, ok := bytes.Cut(readme, []byte("```go\n"))
	require.True(t, ok, "README has no Go code block")
	block, _, ok = bytes.Cut(block, []byte("```\n"))
	require.True(t, ok)
	require.Equal(t, code, string(block), "the README's first Go block differs from readmeTour")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	readmeTour(ctx, t.TempDir(), func(err error) {
		t.Helper()
		require.NoError(t, err)
	})
}
