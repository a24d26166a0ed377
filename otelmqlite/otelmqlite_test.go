package otelmqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/hook"
)

func tracing(t *testing.T) (*Instrumentation, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	inst, err := New(Options{TracerProvider: tp})
	require.NoError(t, err)
	return inst, sr, tp.Tracer("test")
}

func spansNamed(sr *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// TestTraceAcrossRetry: a message sent under a request span, failed once
// by a push consumer and consumed on its retry: both consumer spans are
// children of the producer span (same trace), link to it, and the retry
// is marked under it too.
func TestTraceAcrossRetry(t *testing.T) {
	inst, sr, tracer := tracing(t)
	retried := make(chan struct{}, 1)
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	s, err := mqlite.Open("/d", &mqlite.Options{InMemory: true, Clock: clk,
		Hooks: hook.Chain(inst.Hooks(), mqlite.Hooks{Retry: func(mqlite.RetryEvent) { retried <- struct{}{} }})})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("orders", mqlite.TopicConfig{Queues: 1}))

	ctx, req := tracer.Start(context.Background(), "request")
	p, err := s.NewProducer(mqlite.ProducerOptions{})
	require.NoError(t, err)
	_, err = p.Send(ctx, &mqlite.Message{Topic: "orders", Body: []byte("x")})
	require.NoError(t, err)
	req.End()

	calls := make(chan trace.SpanContext, 2)
	c, err := s.NewPushConsumer("g", mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("orders", nil))
	n := 0
	require.NoError(t, c.Start(func(ctx context.Context, msgs []*mqlite.MessageExt) mqlite.ConsumeResult {
		calls <- trace.SpanContextFromContext(ctx)
		n++
		if n == 1 {
			return mqlite.ReconsumeLater
		}
		return mqlite.ConsumeSuccess
	}))
	first := <-calls
	<-retried
	clk.Advance(10 * time.Second) // the first retry's delay
	second := <-calls
	require.NoError(t, c.Shutdown(context.Background()))

	sends := spansNamed(sr, "send orders")
	require.Len(t, sends, 1)
	send := sends[0]
	require.Equal(t, trace.SpanKindProducer, send.SpanKind())
	require.Equal(t, req.SpanContext().SpanID(), send.Parent().SpanID(), "the send is a child of the request")
	procs := spansNamed(sr, "process orders")
	require.Len(t, procs, 2)
	for i, ps := range procs {
		require.Equal(t, trace.SpanKindConsumer, ps.SpanKind())
		require.Equal(t, send.SpanContext().TraceID(), ps.SpanContext().TraceID(), "delivery %d", i)
		require.Equal(t, send.SpanContext().SpanID(), ps.Parent().SpanID(), "delivery %d", i)
		require.Len(t, ps.Links(), 1)
		require.Equal(t, send.SpanContext().SpanID(), ps.Links()[0].SpanContext.SpanID())
	}
	require.Equal(t, first.SpanID(), procs[0].SpanContext().SpanID(), "the handler runs in the consumer span")
	require.Equal(t, second.SpanID(), procs[1].SpanContext().SpanID())
	retries := spansNamed(sr, "retry")
	require.Len(t, retries, 1)
	require.Equal(t, send.SpanContext().SpanID(), retries[0].Parent().SpanID())
}

// TestTraceAcrossRestart: a message sent, the store closed and opened
// again (new process, new provider): a Poll's receive span is still a
// child of the producer span, whose context the message carried on disk.
func TestTraceAcrossRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	inst, sr, _ := tracing(t)
	s, err := mqlite.Open(dir, &mqlite.Options{Hooks: inst.Hooks(), SegmentSize: 1 << 20})
	require.NoError(t, err)
	_, err = s.Put(context.Background(), &mqlite.Message{Topic: "orders", Body: []byte("x")}, 0)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	send := spansNamed(sr, "send orders")
	require.Len(t, send, 1)

	inst2, sr2, _ := tracing(t)
	s, err = mqlite.Open(dir, &mqlite.Options{Hooks: inst2.Hooks(), SegmentSize: 1 << 20})
	require.NoError(t, err)
	defer s.Close()
	pc, err := s.NewPullConsumer("g", mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("orders", nil))
	got, err := pc.Poll(context.Background(), 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NoError(t, pc.Close())
	recv := spansNamed(sr2, "receive orders")
	require.Len(t, recv, 1)
	require.Equal(t, send[0].SpanContext().TraceID(), recv[0].SpanContext().TraceID())
	require.Equal(t, send[0].SpanContext().SpanID(), recv[0].Parent().SpanID())
	require.True(t, recv[0].Parent().IsRemote())
}

func findMetric(rm metricdata.ResourceMetrics, name string) *metricdata.Metrics {
	for _, sm := range rm.ScopeMetrics {
		for i := range sm.Metrics {
			if sm.Metrics[i].Name == name {
				return &sm.Metrics[i]
			}
		}
	}
	return nil
}

// TestMetrics: the hooks' and the store's instruments report what the
// store reports.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	inst, err := New(Options{MeterProvider: mp})
	require.NoError(t, err)
	s, err := mqlite.Open("/d", &mqlite.Options{InMemory: true, Hooks: inst.Hooks()})
	require.NoError(t, err)
	defer s.Close()
	reg, err := inst.ObserveStore(s)
	require.NoError(t, err)
	defer reg.Unregister()
	require.NoError(t, s.CreateTopic("orders", mqlite.TopicConfig{Queues: 2}))
	ctx := context.Background()
	for i := range 3 {
		_, err := s.Put(ctx, &mqlite.Message{Topic: "orders", Body: []byte("x")}, i%2)
		require.NoError(t, err)
	}
	pc, err := s.NewPullConsumer("g", mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("orders", nil))
	got, err := pc.Poll(ctx, 1)
	require.NoError(t, err)
	dead := got[0].Clone()
	require.NoError(t, pc.Close())
	mqlite.RetryAfter(dead, 0)
	require.NoError(t, s.SendBack(ctx, "g", dead))
	require.NoError(t, s.WaitVisible(ctx))

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	st, err := s.Stats()
	require.NoError(t, err)

	stored := findMetric(rm, "mqlite.messages.stored")
	require.NotNil(t, stored)
	require.Equal(t, st.Throughput.Puts, stored.Data.(metricdata.Sum[int64]).DataPoints[0].Value)

	sent := findMetric(rm, "mqlite.messages.sent")
	require.NotNil(t, sent)
	require.Equal(t, int64(3), sent.Data.(metricdata.Sum[int64]).DataPoints[0].Value)
	dur := findMetric(rm, "mqlite.send.duration")
	require.NotNil(t, dur)
	require.Equal(t, uint64(3), dur.Data.(metricdata.Histogram[float64]).DataPoints[0].Count)

	lag := findMetric(rm, "mqlite.consumer.lag")
	require.NotNil(t, lag)
	want := map[string]int64{}
	for _, g := range st.Groups {
		for _, q := range g.Queues {
			want[g.Name+"/"+q.Topic+"/"+string(rune('0'+q.ID))] = q.Lag
		}
	}
	gotLag := map[string]int64{}
	for _, dp := range lag.Data.(metricdata.Gauge[int64]).DataPoints {
		g, _ := dp.Attributes.Value(attrGroup)
		tp, _ := dp.Attributes.Value(attrDestination)
		q, _ := dp.Attributes.Value(attrQueue)
		gotLag[g.AsString()+"/"+tp.AsString()+"/"+string(rune('0'+q.AsInt64()))] = dp.Value
	}
	require.Equal(t, want, gotLag)
	require.Equal(t, int64(3), gotLag["g/orders/0"]+gotLag["g/orders/1"], "nothing committed")

	dlq := findMetric(rm, "mqlite.dlq.messages")
	require.NotNil(t, dlq)
	dps := dlq.Data.(metricdata.Gauge[int64]).DataPoints
	require.Len(t, dps, 1)
	require.Equal(t, int64(1), dps[0].Value)
	for _, name := range []string{"mqlite.commitlog.flushes", "mqlite.flush.latency", "mqlite.commitlog.size", "mqlite.put.rate", "mqlite.queue.messages"} {
		require.NotNil(t, findMetric(rm, name), name)
	}
}
