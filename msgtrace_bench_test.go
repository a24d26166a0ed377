package mqlite

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkObservability measures what hooks and the message trace cost
// a 128-byte FlushAsync Put, and a Put plus its Poll by a pull consumer:
// "off" has neither, "hooks" a store-wide AfterSend, Stored and
// BeforeConsume that do nothing, "trace" Options.MessageTrace (two trace
// records per Put, one more per delivery).
func BenchmarkObservability(b *testing.B) {
	modes := map[string]func(*Options){
		"off": func(*Options) {},
		"hooks": func(o *Options) {
			o.Hooks = Hooks{AfterSend: func(context.Context, SendEvent) {}, Stored: func(StoreEvent) {},
				BeforeConsume: func(ctx context.Context, _ ConsumeEvent) context.Context { return ctx }}
		},
		"trace": func(o *Options) { o.MessageTrace = true },
	}
	for _, name := range []string{"off", "hooks", "trace"} {
		b.Run("put/"+name, func(b *testing.B) { benchObserved(b, modes[name], false) })
		b.Run("put+poll/"+name, func(b *testing.B) { benchObserved(b, modes[name], true) })
	}
}

func benchObserved(b *testing.B, mode func(*Options), poll bool) {
	o := &Options{SegmentSize: 256 << 20}
	mode(o)
	s, err := Open(filepath.Join(b.TempDir(), "store"), o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateTopic("bench", TopicConfig{Queues: 1}); err != nil {
		b.Fatal(err)
	}
	var pc *PullConsumer
	if poll {
		if pc, err = s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, AutoCommit: true}); err != nil {
			b.Fatal(err)
		}
		defer pc.Close()
		if err := pc.Subscribe("bench", nil); err != nil {
			b.Fatal(err)
		}
	}
	m := &Message{Topic: "bench", Body: make([]byte, 128)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.Put(ctx, m, 0); err != nil {
			b.Fatal(err)
		}
		if poll {
			if _, err := pc.Poll(ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
