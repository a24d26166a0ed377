//go:build jetstream

// Comparison rows against nats-server JetStream over loopback, the broker a
// Go user would otherwise run on one machine. Behind a build tag so that the
// module's ordinary test build does not compile nats-server:
//
//	go test -tags jetstream -run X -bench 'JetStream|Send16|Drain' -benchtime 5000x

package broker

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func startJetStream(b *testing.B, sync bool) jetstream.JetStream {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: b.TempDir(), SyncAlways: sync, NoLog: true, NoSigs: true})
	if err != nil {
		b.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		b.Fatal("jetstream not ready")
	}
	nc, err := nats.Connect(ns.ClientURL()) // over loopback TCP, as the broker's clients
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close(); ns.Shutdown(); ns.WaitForShutdown() })
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	_, err = js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{Name: "B", Subjects: []string{"b"},
		Storage: jetstream.FileStorage, Replicas: 1})
	if err != nil {
		b.Fatal(err)
	}
	return js
}

func BenchmarkJetStreamPublish16(b *testing.B) {
	for _, mode := range []struct {
		name string
		sync bool
	}{{"default-sync-interval", false}, {"sync-always", true}} {
		b.Run(mode.name, func(b *testing.B) {
			js := startJetStream(b, mode.sync)
			body := make([]byte, 128)
			lat := make([][]time.Duration, 16)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						if _, err := js.Publish(context.Background(), "b", body); err != nil {
							b.Error(err)
							return
						}
						lat[w] = append(lat[w], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(len(all))/el.Seconds(), "msgs/s")
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}

func BenchmarkJetStreamDrain(b *testing.B) {
	js := startJetStream(b, false)
	body := make([]byte, 128)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if _, err := js.PublishAsync("b", body); err != nil {
			b.Fatal(err)
		}
		if i%2000 == 1999 || i == b.N-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("publish backlog")
			}
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "B", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	got := 0
	for got < b.N {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		for range batch.Messages() {
			got++
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
