package mqlite

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

func txStore(t *testing.T, fs vfs.FS, clk clock.Clock) *Store {
	t.Helper()
	// Rounds run only when a test asks (CheckTransactions).
	s, err := openFS(fs, "/tx", &Options{Clock: clk, SegmentSize: 4 << 20, Flush: FlushSync, TxCheckInterval: 24 * time.Hour})
	require.NoError(t, err)
	return s
}

// allMessages reads every message of topic's queues.
func allMessages(t *testing.T, s *Store, topicName string) []*MessageExt {
	t.Helper()
	require.NoError(t, s.WaitVisible(context.Background()))
	c, err := s.Topic(topicName)
	require.NoError(t, err)
	var out []*MessageExt
	for q := range c.Queues {
		for m, err := range s.Messages(topicName, q, 0) {
			require.NoError(t, err)
			out = append(out, m)
		}
	}
	return out
}

func TestTransactionCommitAndRollback(t *testing.T) {
	s := txStore(t, vfs.NewMem(), clock.NewFake(t0))
	defer s.Close()
	require.NoError(t, s.CreateTopic("pay", TopicConfig{Queues: 2}))
	tp, err := s.NewTransactionProducer(never(t), TransactionOptions{Group: "g"})
	require.NoError(t, err)
	ctx := context.Background()
	m := &Message{Topic: "pay", Tags: "debit", Keys: []string{"acct-1"}, Properties: map[string]string{"amount": "12"}, Body: []byte("commit me")}
	res, err := tp.SendInTransaction(ctx, m, func(context.Context, *Message) TxState { return CommitMessage })
	require.NoError(t, err)
	require.NotEmpty(t, res.TransactionID)
	_, err = tp.SendInTransaction(ctx, &Message{Topic: "pay", Body: []byte("roll me back")},
		func(context.Context, *Message) TxState { return RollbackMessage })
	require.NoError(t, err)

	got := allMessages(t, s, "pay")
	require.Len(t, got, 1)
	require.Equal(t, "commit me", string(got[0].Body))
	require.Equal(t, "debit", got[0].Tags)
	require.Equal(t, []string{"acct-1"}, got[0].Keys)
	require.Equal(t, "12", got[0].Properties["amount"])
	require.Equal(t, res.TransactionID, got[0].UniqKey)
	require.Zero(t, s.PendingTransactions())
	_, err = s.ReadQueue(ctx, HalfTopic, 0, 0, 1)
	require.NoError(t, err, "half messages are stored, only in the half topic")
}

// TestTransactionCheckBack leaves a transaction unknown; the checker says
// Unknown twice and Commit at the third check, which lands at the third
// check interval of virtual time.
func TestTransactionCheckBack(t *testing.T) {
	clk := clock.NewFake(t0)
	s := txStore(t, vfs.NewMem(), clk)
	defer s.Close()
	var checks atomic.Int32
	tp, err := s.NewTransactionProducer(func(_ context.Context, m *MessageExt) TxState {
		require.Equal(t, "later", string(m.Body))
		require.Equal(t, "pay", m.Topic)
		if checks.Add(1) < 3 {
			return TxUnknown
		}
		return CommitMessage
	}, TransactionOptions{})
	require.NoError(t, err)
	_, err = tp.SendInTransaction(context.Background(), &Message{Topic: "pay", Body: []byte("later")},
		func(context.Context, *Message) TxState { return TxUnknown })
	require.NoError(t, err)
	require.NoError(t, s.CheckTransactions(context.Background()))
	require.Equal(t, 1, s.PendingTransactions())
	require.Zero(t, checks.Load(), "not before the timeout")
	for i := 1; i <= 3; i++ {
		clk.Set(t0.Add(time.Duration(i) * time.Minute))
		require.NoError(t, s.CheckTransactions(context.Background()))
		require.Equal(t, int32(i), checks.Load())
	}
	got := allMessages(t, s, "pay")
	require.Len(t, got, 1)
	require.Equal(t, t0.Add(3*time.Minute), got[0].StoreTimestamp.UTC(), "committed at the third check")
	require.Zero(t, s.PendingTransactions())
}

func TestTransactionLocalPanicIsUnknown(t *testing.T) {
	s := txStore(t, vfs.NewMem(), clock.NewFake(t0))
	defer s.Close()
	tp, err := s.NewTransactionProducer(never(t), TransactionOptions{})
	require.NoError(t, err)
	_, err = tp.SendInTransaction(context.Background(), &Message{Topic: "pay", Body: []byte("x")},
		func(context.Context, *Message) TxState { panic("boom") })
	require.ErrorIs(t, err, ErrLocalTx)
	require.NoError(t, s.CheckTransactions(context.Background()))
	require.Equal(t, 1, s.PendingTransactions())
	_, err = tp.SendInTransaction(context.Background(), nil, func(context.Context, *Message) TxState { return CommitMessage })
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = tp.SendInTransaction(context.Background(), &Message{Topic: HalfTopic, Body: []byte("x")},
		func(context.Context, *Message) TxState { return CommitMessage })
	require.ErrorIs(t, err, ErrInvalidTopic)
}

// TestConcurrentTransactions runs many transactions with random outcomes;
// unknown ones are decided by the checker. Delivered == committed, exactly.
func TestConcurrentTransactions(t *testing.T) {
	n := 10_000
	if testing.Short() {
		n = 1_000
	}
	clk := clock.NewFake(t0)
	s, err := Open("/ctx", &Options{InMemory: true, Clock: clk})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("c", TopicConfig{Queues: 4}))
	decide := func(body string) TxState {
		var i int
		fmt.Sscan(body, &i)
		if i%3 == 0 {
			return RollbackMessage
		}
		return CommitMessage
	}
	tp, err := s.NewTransactionProducer(func(_ context.Context, m *MessageExt) TxState { return decide(string(m.Body)) }, TransactionOptions{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	const workers = 8
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := w; i < n; i += workers {
				body := fmt.Sprint(i)
				state := decide(body)
				if rng.IntN(4) == 0 {
					state = TxUnknown
				}
				_, err := tp.SendInTransaction(context.Background(), &Message{Topic: "c", Body: []byte(body)},
					func(context.Context, *Message) TxState { return state })
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	clk.Advance(time.Minute)
	require.NoError(t, s.CheckTransactions(context.Background()))
	require.Zero(t, s.PendingTransactions())
	seen := map[string]int{}
	for _, m := range allMessages(t, s, "c") {
		seen[string(m.Body)]++
	}
	want := 0
	for i := range n {
		if decide(fmt.Sprint(i)) == CommitMessage {
			want++
			require.Equal(t, 1, seen[fmt.Sprint(i)], "committed %d delivered once", i)
		} else {
			require.Zero(t, seen[fmt.Sprint(i)], "rolled back %d never delivered", i)
		}
	}
	require.Len(t, seen, want)
}

const txChildEnv = "MQLITE_TX_CHILD_DIR"

// TestTxCrashChild is the child of TestTransactionSurvivesKill9: it sends
// a transaction whose local part announces itself and then blocks, so the
// parent kills the process between the half message and the decision.
func TestTxCrashChild(t *testing.T) {
	dir := os.Getenv(txChildEnv)
	if dir == "" {
		t.Skip("child process only")
	}
	s, err := Open(dir, &Options{Flush: FlushSync, SegmentSize: 1 << 20})
	require.NoError(t, err)
	tp, err := s.NewTransactionProducer(func(context.Context, *MessageExt) TxState { return TxUnknown }, TransactionOptions{Group: "crash"})
	require.NoError(t, err)
	tp.SendInTransaction(context.Background(), &Message{Topic: "pay", Body: []byte("in doubt")},
		func(context.Context, *Message) TxState {
			fmt.Println("HALF STORED")
			select {} // killed here
		})
}

func TestTransactionSurvivesKill9(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	cmd := exec.Command(os.Args[0], "-test.run=^TestTxCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), txChildEnv+"="+dir)
	cmd.SysProcAttr = childProcAttr()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "HALF STORED" {
	}
	require.NoError(t, cmd.Process.Kill())
	cmd.Wait()

	clk := clock.NewFake(time.Now().Add(time.Minute))
	s, err := Open(dir, &Options{Flush: FlushSync, SegmentSize: 1 << 20, Clock: clk})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, 1, s.PendingTransactions(), "the half message survived")
	var checks atomic.Int32
	_, err = s.NewTransactionProducer(func(_ context.Context, m *MessageExt) TxState {
		checks.Add(1)
		return CommitMessage
	}, TransactionOptions{Group: "crash"})
	require.NoError(t, err)
	require.NoError(t, s.CheckTransactions(context.Background()))
	require.NoError(t, s.CheckTransactions(context.Background()))
	require.Equal(t, int32(1), checks.Load())
	got := allMessages(t, s, "pay")
	require.Len(t, got, 1)
	require.Equal(t, "in doubt", string(got[0].Body))
}
