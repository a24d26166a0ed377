package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The NATS JetStream adapter: a server embedded in the process (no
// listener), a client connected in-process, one file-storage stream.

const (
	jsStream     = "BENCH"
	jsSubject    = "bench"
	jsMaxPending = 4096 // PublishAsync window (at least)
)

type jetStreamSystem struct{}

func (jetStreamSystem) Name() string { return "jetstream" }

func (jetStreamSystem) Durability(p Params) string {
	call := "PublishAsync, acks collected in order"
	switch {
	case p.Batch > 1:
		call = fmt.Sprintf("%d PublishAsync then wait for all acks (no batch API)", p.Batch)
	case p.Sync:
		call = "Publish per message (waits for the ack)"
	}
	if p.Sync {
		return "file store, SyncAlways (fsync per message, no group commit); " + call
	}
	return "file store, default SyncInterval (fsync every 2 min); " + call
}

func (jetStreamSystem) Open(p Params) (Queue, error) {
	ns, err := server.NewServer(&server.Options{
		ServerName: "mqbench", JetStream: true, StoreDir: p.Dir, SyncAlways: p.Sync,
		DontListen: true, NoLog: true, NoSigs: true,
	})
	if err != nil {
		return nil, err
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("bench: jetstream server not ready")
	}
	q := &jsQueue{ns: ns, coll: make([]*jsCollector, max(p.Producers, 1))}
	// Room for every producer's whole batch: a stalled PublishAsync fails.
	if err := q.connect(max(jsMaxPending, p.Producers*p.Batch)); err != nil {
		q.Close()
		return nil, err
	}
	return q, nil
}

type jsQueue struct {
	ns   *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	coll []*jsCollector // per producer, for SendAsync
}

func (q *jsQueue) connect(maxPending int) error {
	nc, err := nats.Connect("", nats.InProcessServer(q.ns))
	if err != nil {
		return err
	}
	q.nc = nc
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending))
	if err != nil {
		return err
	}
	q.js = js
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: jsStream, Subjects: []string{jsSubject},
		Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, Replicas: 1})
	return err
}

func (q *jsQueue) Send(_ int, bodies [][]byte) error {
	ctx := context.Background()
	if len(bodies) == 1 {
		_, err := q.js.Publish(ctx, jsSubject, bodies[0])
		return err
	}
	fs := make([]jetstream.PubAckFuture, len(bodies))
	for i, b := range bodies {
		f, err := q.js.PublishAsync(jsSubject, b)
		if err != nil {
			return err
		}
		fs[i] = f
	}
	for _, f := range fs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		}
	}
	return nil
}

// jsCollector waits for one producer's acks in order and records their
// latency.
type jsCollector struct {
	ch   chan jsPending
	wg   sync.WaitGroup // pending acks
	done chan struct{}
	err  error // first error; read after done or wg.Wait
	mu   sync.Mutex
}

type jsPending struct {
	f    jetstream.PubAckFuture
	sent time.Time
	h    *Hist
}

func (c *jsCollector) run() {
	defer close(c.done)
	for p := range c.ch {
		select {
		case <-p.f.Ok():
			p.h.Record(time.Since(p.sent))
		case err := <-p.f.Err():
			c.mu.Lock()
			if c.err == nil {
				c.err = err
			}
			c.mu.Unlock()
		}
		c.wg.Done()
	}
}

func (q *jsQueue) SendAsync(producer int, body []byte, h *Hist) error {
	c := q.coll[producer]
	if c == nil {
		c = &jsCollector{ch: make(chan jsPending, jsMaxPending), done: make(chan struct{})}
		q.coll[producer] = c
		go c.run()
	}
	t := time.Now()
	f, err := q.js.PublishAsync(jsSubject, body)
	if err != nil {
		return err
	}
	c.wg.Add(1)
	c.ch <- jsPending{f, t, h}
	return nil
}

// Drain waits for every producer's acks. Producers must have stopped.
func (q *jsQueue) Drain() error {
	var errList []error
	for _, c := range q.coll {
		if c == nil {
			continue
		}
		c.wg.Wait()
		c.mu.Lock()
		errList = append(errList, c.err)
		c.mu.Unlock()
	}
	return errors.Join(errList...)
}

func (q *jsQueue) NewConsumer() (Consumer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := q.js.OrderedConsumer(ctx, jsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	return &jsConsumer{it: it}, nil
}

func (q *jsQueue) Close() error {
	for _, c := range q.coll {
		if c != nil {
			close(c.ch)
			<-c.done
		}
	}
	q.coll = nil
	if q.nc != nil {
		q.nc.Close()
	}
	q.ns.Shutdown()
	q.ns.WaitForShutdown()
	return nil
}

type jsConsumer struct{ it jetstream.MessagesContext }

func (c *jsConsumer) Next(ctx context.Context, dst [][]byte) ([][]byte, error) {
	m, err := c.it.Next(jetstream.NextContext(ctx))
	if err != nil {
		return dst, err
	}
	return append(dst, m.Data()), nil
}

func (c *jsConsumer) Close() error {
	c.it.Stop()
	return nil
}
