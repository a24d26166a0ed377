package broker

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/broker/remoting"
)

func TestShutdownAnswersLongPollsThenCloses(t *testing.T) {
	f := startBroker(t, nil, nil)
	if err := f.store.CreateTopic("S", mqlite.TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, f.b.Addr())
	pull := map[string]string{"consumerGroup": "g", "topic": "S", "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
		"sysFlag": strconv.Itoa(pullFlagSuspend), "suspendTimeoutMillis": "30000"}
	frame, _ := remoting.Encode(&remoting.Command{Code: reqPullMessage, Opaque: 7, ExtFields: pull})
	c.writeRaw(frame)
	// The pull is the connection's only request: once it holds a pending
	// slot it is in flight (suspended, or about to be).
	eventually(t, 5*time.Second, "the suspended pull", func() bool {
		f.b.mu.Lock()
		defer f.b.mu.Unlock()
		for cn := range f.b.mu.conns {
			if len(cn.pending) == 1 {
				return true
			}
		}
		return false
	})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("shutdown took %s with a 30 s long poll pending", el)
	}
	r, err := c.read()
	if err != nil || r.Opaque != 7 || r.Code != resPullNotFound {
		t.Fatalf("the pending pull was not answered: %v %+v", err, r)
	}
	c.expectClosed()
	if err := f.b.Shutdown(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("second shutdown: %v", err)
	}
	if _, err := dialRawErr(f.b.Addr()); err == nil {
		t.Fatal("still accepting after shutdown")
	}
	// The store stays usable: the broker does not own it.
	if _, err := f.store.Put(context.Background(), &mqlite.Message{Topic: "S", Body: []byte("x")}, 0); err != nil {
		t.Fatalf("store after broker shutdown: %v", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	st, err := mqlite.Open(t.TempDir(), &mqlite.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = Listen(st, &Options{MaxConns: -1, MaxFrame: 10, IdleTimeout: -time.Second, Addr: "127.0.0.1:0"})
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("bad options: %v", err)
	}
	for _, want := range []string{"MaxConns", "MaxFrame", "IdleTimeout"} {
		if !contains(err.Error(), want) {
			t.Fatalf("error %q does not name %s", err, want)
		}
	}
	if _, err := Listen(nil, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("nil store: %v", err)
	}
	b, err := Listen(st, &Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := Listen(st, &Options{Addr: b.Addr()}); err == nil {
		t.Fatal("second listener on a taken address")
	}
}

func TestShutdownClosesAnOwnedStore(t *testing.T) {
	st, err := mqlite.Open(t.TempDir(), &mqlite.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Listen(st, &Options{Addr: "127.0.0.1:0", CloseStore: true})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), &mqlite.Message{Topic: "S", Body: []byte("x")}, 0); !errors.Is(err, mqlite.ErrClosed) {
		t.Fatalf("store after Shutdown with CloseStore: %v", err)
	}
}
