package mqlite

// S32 of the reliability plan: transactional half messages across crashes.
// Transactions whose local part commits, rolls back or stays unknown run
// under FlushSync while crash images (kill -9 and power loss) are taken at
// random file operations, also between a half message and its decision.
// Each image is opened and checked back with a resolver that knows every
// transaction's true outcome: no half message is ever visible, a commit
// acknowledged before the image shows exactly once, a rollback never, and
// every transaction whose half message survived is resolved by the truth.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

const txCrashN = 120 // transactions per run

// txTruth is a transaction's outcome: what its local part returned (commit
// or rollback decide; unknown leaves it to the check-back) and what the
// check-back resolver answers.
type txTruth struct {
	local  TxState
	commit bool
}

// txImage is a crash image with, per transaction, what SendInTransaction
// had returned by then (-1: not returned; else the local state).
type txImage struct {
	fs       *vfs.MemFS
	kind     string
	returned []TxState
	op       int
}

func txOptions(clk clock.Clock) *Options {
	o := plOptions(clk, 16<<10)
	o.TxCheckInterval, o.TxTimeout = time.Hour, time.Second
	return o
}

func TestTransactionsAcrossCrashImages(t *testing.T) {
	seed := plSeedValue(t)
	for run := range 10 {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		truth := make([]txTruth, txCrashN)
		for i := range truth {
			truth[i] = txTruth{local: []TxState{CommitMessage, RollbackMessage, TxUnknown}[rng.IntN(3)], commit: rng.IntN(2) == 0}
			switch truth[i].local {
			case CommitMessage:
				truth[i].commit = true
			case RollbackMessage:
				truth[i].commit = false
			}
		}
		// The operations at which images are taken: ~30 of the run's.
		var mu sync.Mutex
		returned := make([]TxState, txCrashN)
		for i := range returned {
			returned[i] = -1
		}
		var imgs []txImage
		ops := 0
		at := map[int]bool{}
		for range 30 {
			at[rng.IntN(txCrashN*3)] = true // a run has about three operations a transaction
		}
		ffs := vfs.NewFaulty(vfs.NewMem())
		imgRng := rand.New(rand.NewPCG(seed, uint64(run)+1000))
		ffs.SetInjector(func(op vfs.Op, path string) error {
			mu.Lock()
			defer mu.Unlock()
			i := ops
			ops++
			if at[i] {
				r := append([]TxState(nil), returned...)
				imgs = append(imgs,
					txImage{ffs.Crash(imgRng, 1), "kill", r, i},
					txImage{ffs.Crash(imgRng, imgRng.Float64()), "power loss", r, i})
			}
			return nil
		})
		clk := clock.NewFake(t0)
		s, err := openFS(ffs, plDir, txOptions(clk))
		require.NoError(t, err)
		require.NoError(t, s.CreateTopic("pay", TopicConfig{Queues: 2}))
		tp, err := s.NewTransactionProducer(func(context.Context, *MessageExt) TxState { return TxUnknown }, TransactionOptions{Group: "g"})
		require.NoError(t, err)
		for i := range txCrashN {
			m := &Message{Topic: "pay", Keys: []string{fmt.Sprintf("tx-%d", i)}, Body: []byte(fmt.Sprintf("tx-%d", i))}
			_, err := tp.SendInTransaction(context.Background(), m, func(context.Context, *Message) TxState { return truth[i].local })
			require.NoError(t, err)
			mu.Lock()
			returned[i] = truth[i].local
			mu.Unlock()
		}
		ffs.SetInjector(nil)
		require.NoError(t, s.Close())
		require.NotEmpty(t, imgs)

		delivered := 0
		for _, img := range imgs {
			what := fmt.Sprintf("run %d (seed %d), %s image at op %d", run, seed, img.kind, img.op)
			delivered += checkTxImage(t, what, img, truth)
		}
		t.Logf("run %d: %d operations, %d images, %d committed transactions delivered in them", run, ops, len(imgs), delivered)
	}
}

// checkTxImage opens img, resolves what is pending with the truth, and
// checks the real topic against it; it returns the transactions delivered.
func checkTxImage(t *testing.T, what string, img txImage, truth []txTruth) int {
	clk := clock.NewFake(t0.Add(time.Hour))
	s, err := openFS(img.fs, plDir, txOptions(clk))
	require.NoError(t, err, what)
	defer s.Close()
	_, err = s.NewTransactionProducer(func(_ context.Context, m *MessageExt) TxState {
		i, err := strconv.Atoi(strings.TrimPrefix(string(m.Body), "tx-"))
		if err != nil || i < 0 || i >= len(truth) {
			t.Errorf("%s: check-back of an unknown message %q", what, m.Body)
			return RollbackMessage
		}
		if truth[i].commit {
			return CommitMessage
		}
		return RollbackMessage
	}, TransactionOptions{Group: "g"})
	require.NoError(t, err, what)
	for range 3 {
		require.NoError(t, s.CheckTransactions(context.Background()), what)
	}
	require.Zero(t, s.PendingTransactions(), "%s: every surviving half message resolved", what)
	seen := map[int]int{}
	for q := range 2 {
		for m, err := range s.Messages("pay", q, 0) {
			if errors.Is(err, ErrTopicNotFound) {
				break // an image from before CreateTopic
			}
			require.NoError(t, err, what)
			i, err := strconv.Atoi(strings.TrimPrefix(string(m.Body), "tx-"))
			require.NoError(t, err, "%s: %q", what, m.Body)
			seen[i]++
		}
	}
	for i, tr := range truth {
		switch {
		case seen[i] > 1:
			t.Fatalf("%s: transaction %d delivered %d times", what, i, seen[i])
		case seen[i] == 1 && !tr.commit:
			t.Fatalf("%s: transaction %d (local %v) delivered, but it rolled back", what, i, tr.local)
		case seen[i] == 0 && tr.commit && img.returned[i] == CommitMessage:
			t.Fatalf("%s: transaction %d committed and acknowledged, not delivered", what, i)
		case seen[i] == 0 && tr.commit && img.returned[i] == TxUnknown:
			t.Fatalf("%s: transaction %d's half message was acknowledged (unknown), its check-back commits, not delivered", what, i)
		}
	}
	return len(seen)
}
