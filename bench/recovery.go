package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/mqlite/mqlite"
)

// The crash test, mqlite only. A child (kindRecoveryWrite) puts 1 KiB
// messages, each with one key, with FlushAsync until the CommitLog holds
// j.RecoveryBytes, prints a ready line and keeps writing; the runner kills
// it with SIGKILL mid-write. Another child (KindRecovery) then times Open
// and the first read, and random key lookups.

const (
	recoveryBody  = 1024
	recoveryReady = "READY"
)

// RecoveryResult is what the recovery child measured.
type RecoveryResult struct {
	CommitLogBytes  int64         // end of the recovered CommitLog
	Messages        int64         // messages in the queue after recovery
	Open            time.Duration // mqlite.Open after the kill
	FirstRead       time.Duration // the first ReadQueue after Open
	CleanShutdown   bool
	CheckpointFound bool
	RedispatchedMB  float64 // CommitLog re-dispatched into the indexes
	TruncatedBytes  int64
	DroppedRecords  int
	Lookups         int           // MessagesByKey calls for random keys
	Hits            int           // lookups that found their message
	LookupP50       time.Duration // per lookup
	LookupP99       time.Duration
	LookupMean      time.Duration
}

func recoveryKey(i int64) string { return "k-" + strconv.FormatInt(i, 10) }

func recoveryOptions(j Job) *mqlite.Options {
	return mqliteOptions(mqlite.FlushAsync, j.SegmentSize)
}

// runRecoveryWrite writes until killed (it never returns on success).
func runRecoveryWrite(j Job) error {
	s, err := mqlite.Open(j.Dir, recoveryOptions(j))
	if err != nil {
		return err
	}
	pool := newBodyPool(recoveryBody)
	ctx := context.Background()
	ready := false
	for i := int64(0); ; i++ {
		m := &mqlite.Message{Topic: mqliteTopic, Keys: []string{recoveryKey(i)}, Body: pool.body(int(i))}
		res, err := s.Put(ctx, m, 0)
		if err != nil {
			return err
		}
		end := res.Offset + int64(res.Size)
		if !ready && end >= j.RecoveryBytes {
			fmt.Fprintf(os.Stdout, "%s %d\n", recoveryReady, i+1)
			ready = true
		}
		if end >= j.RecoveryBytes+j.RecoveryBytes/4 {
			time.Sleep(time.Hour) // the runner kills us well before
			return fmt.Errorf("bench: recovery writer was not killed")
		}
	}
}

// runRecovery reopens the killed writer's store.
func runRecovery(j Job) (r Result, err error) {
	r.Durability = "FlushAsync, killed with SIGKILL mid-write (page cache intact); " + mqliteSystem{}.Durability(j.Params())
	rr := &RecoveryResult{Lookups: j.Lookups}
	r.Recovery = rr
	start := time.Now()
	s, err := mqlite.Open(j.Dir, recoveryOptions(j))
	if err != nil {
		return r, err
	}
	defer func() {
		if cerr := s.Close(); err == nil {
			err = cerr
		}
	}()
	rr.Open = time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t := time.Now()
	ms, err := s.ReadQueue(ctx, mqliteTopic, 0, 0, 1)
	if err != nil {
		return r, fmt.Errorf("first read: %w", err)
	}
	rr.FirstRead = time.Since(t)
	if len(ms) != 1 || !slices.Equal(ms[0].Keys, []string{recoveryKey(0)}) {
		return r, fmt.Errorf("first read: got %d messages, not the first one written", len(ms))
	}
	rep := s.Recovery()
	rr.CommitLogBytes, rr.CleanShutdown, rr.CheckpointFound = rep.CommitLogEnd, rep.CleanShutdown, rep.CheckpointFound
	rr.RedispatchedMB = float64(rep.Redispatched) / 1e6
	rr.TruncatedBytes, rr.DroppedRecords = rep.TruncatedBytes, rep.DroppedRecords
	if rr.Messages, err = s.MaxOffset(mqliteTopic, 0); err != nil {
		return r, err
	}
	if rr.Messages == 0 {
		return r, fmt.Errorf("no message survived")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var h Hist
	from, to := time.UnixMilli(0), time.Now().Add(time.Hour)
	for range j.Lookups {
		key := recoveryKey(rng.Int64N(rr.Messages))
		t := time.Now()
		ms, err := s.MessagesByKey(mqliteTopic, key, from, to, 1)
		h.Record(time.Since(t))
		if err != nil {
			return r, fmt.Errorf("lookup %s: %w", key, err)
		}
		if len(ms) == 1 && slices.Contains(ms[0].Keys, key) {
			rr.Hits++
		}
	}
	rr.LookupP50, rr.LookupP99, rr.LookupMean = h.Quantile(0.5), h.Quantile(0.99), h.Mean()
	r.Msgs, r.Bytes = rr.Messages, rr.CommitLogBytes
	r.Seconds = (rr.Open + rr.FirstRead).Seconds()
	return r, nil
}
