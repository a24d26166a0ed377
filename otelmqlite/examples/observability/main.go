// Command observability wires mqlite's hooks, OpenTelemetry (package
// otelmqlite) and the dashboard (package dashboard) around one store: a
// request span sends an order, a consumer group fails it once and
// consumes it on the retry, and the program prints the spans (one trace
// from the request to both deliveries), a few metrics, and what the
// dashboard's JSON says. With -serve it keeps the dashboard up at
// http://ADDR/mqlite/ until interrupted.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/dashboard"
	"github.com/mqlite/mqlite/hook"
	"github.com/mqlite/mqlite/otelmqlite"
)

// printer is a span exporter that prints each span on one line.
type printer struct{}

func (printer) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	for _, s := range spans {
		fmt.Printf("span  %-16s trace=%s span=%s parent=%s links=%d\n", s.Name(), s.SpanContext().TraceID(),
			s.SpanContext().SpanID(), s.Parent().SpanID(), len(s.Links()))
	}
	return nil
}
func (printer) Shutdown(context.Context) error { return nil }

func main() {
	serve := flag.String("serve", "", "keep the dashboard up at this address (e.g. localhost:8080)")
	flag.Parse()
	dir, err := os.MkdirTemp("", "mqlite-observability-")
	check(err)
	defer os.RemoveAll(dir)
	ctx := context.Background()

	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(printer{}))
	defer tp.Shutdown(ctx)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	inst, err := otelmqlite.New(otelmqlite.Options{TracerProvider: tp, MeterProvider: mp})
	check(err)

	// Our own hook beside OTel's: count retries, and tell main when one
	// is stored.
	var retries atomic.Int64
	retried := make(chan struct{}, 1)
	mine := mqlite.Hooks{Retry: func(e mqlite.RetryEvent) {
		retries.Add(1)
		fmt.Printf("hook  retry of %s for group %s, attempt %d in %s\n", e.Message.MsgID, e.Group, e.Attempt, e.Delay)
		retried <- struct{}{}
	}}
	s, err := mqlite.Open(dir, &mqlite.Options{Hooks: hook.Chain(inst.Hooks(), mine), SegmentSize: 4 << 20,
		DelayLevels: []time.Duration{time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}})
	check(err)
	defer s.Close()
	reg, err := inst.ObserveStore(s)
	check(err)
	defer reg.Unregister()
	check(s.CreateTopic("orders", mqlite.TopicConfig{Queues: 2}))

	reqCtx, req := tp.Tracer("example").Start(ctx, "HTTP POST /orders")
	p, err := s.NewProducer(mqlite.ProducerOptions{})
	check(err)
	res, err := p.Send(reqCtx, &mqlite.Message{Topic: "orders", Keys: []string{"order-1"}, Body: []byte(`{"order":1}`)})
	check(err)
	req.End()
	m, err := s.MessageByID(res.MsgID())
	check(err)
	fmt.Printf("sent  %s with traceparent %s\n", res.MsgID(), m.Properties["traceparent"])

	done := make(chan struct{})
	calls := 0
	c, err := s.NewPushConsumer("billing", mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset})
	check(err)
	check(c.Subscribe("orders", nil))
	check(c.Start(func(ctx context.Context, msgs []*mqlite.MessageExt) mqlite.ConsumeResult {
		calls++
		if calls == 1 {
			return mqlite.ReconsumeLater // fails once: retried after the group's first delay
		}
		close(done)
		return mqlite.ConsumeSuccess
	}))
	<-retried
	<-done
	check(c.Shutdown(ctx))

	var rm metricdata.ResourceMetrics
	check(reader.Collect(ctx, &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, met := range sm.Metrics {
			switch d := met.Data.(type) {
			case metricdata.Sum[int64]:
				fmt.Printf("metric %-26s %d\n", met.Name, d.DataPoints[0].Value)
			case metricdata.Histogram[float64]:
				fmt.Printf("metric %-26s count=%d\n", met.Name, d.DataPoints[0].Count)
			}
		}
	}

	h, err := dashboard.New(s, &dashboard.Options{Prefix: "/mqlite"})
	check(err)
	mux := http.NewServeMux()
	mux.Handle("/mqlite/", h)
	addr := *serve
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	check(err)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/mqlite/api/group?name=billing")
	check(err)
	var g dashboard.GroupPage
	check(json.NewDecoder(resp.Body).Decode(&g))
	resp.Body.Close()
	fmt.Printf("dashboard: group %s lag %d, %d retries seen by our hook\n", g.Name, g.Lag, retries.Load())
	if *serve != "" {
		fmt.Printf("dashboard at http://%s/mqlite/ (Ctrl-C to stop)\n", ln.Addr())
		stop, cancel := signal.NotifyContext(ctx, os.Interrupt)
		defer cancel()
		<-stop.Done()
	}
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
