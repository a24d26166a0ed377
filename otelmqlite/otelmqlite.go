// Package otelmqlite connects an mqlite Store to OpenTelemetry: W3C trace
// context carried in message properties from the producer to every
// consumer (across retries, dead letters, re-drives and restarts), spans
// for sends and deliveries, and the store's metrics as OTel instruments.
//
//	inst, err := otelmqlite.New(otelmqlite.Options{})          // global providers
//	s, err := mqlite.Open(dir, &mqlite.Options{Hooks: inst.Hooks()})
//	reg, err := inst.ObserveStore(s)                            // store metrics
//	defer reg.Unregister()
//
// # Traces
//
// A send starts a producer span "send <topic>" (a child of the send's
// context) and writes its context into the message's properties
// ("traceparent", "tracestate" with the default propagator). A push
// consumer's handler call runs in a consumer span "process <topic>" whose
// parent is the producer span of the message (a batch of several messages:
// the handler's context, with a link to each producer span) and which
// links the producer span too; the handler's ctx carries it. A pull
// consumer's Poll records a "receive <topic>" span per batch, linked to
// every producer span. The properties travel with the message into the
// retry topic, the dead-letter topic and back through Redrive, and are
// stored on disk, so the parent-child relation holds across retries and
// restarts. A retry, a death and a re-drive each add a short span
// ("retry", "dead letter", "redrive") under the producer span.
//
// # Metrics
//
// Hooks record mqlite.send.duration and mqlite.consume.duration
// (histograms, seconds) and count mqlite.messages.sent and
// mqlite.messages.consumed (attribute mqlite.result ok/error).
// ObserveStore reads Store.Stats at each collection: messages stored and
// read (counters, a backend derives rates; the store's own per-second
// rates as gauges), flush latency p50/p99/max and flushes (syncs), lag
// per group, topic and queue, dead letters per group, disk use, the
// CommitLog's size, pending transactions and hook panics.
//
// The package is a module of its own so that the root module does not
// depend on OpenTelemetry.
package otelmqlite

import (
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mqlite/mqlite"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/mqlite/mqlite/otelmqlite"

// Options configure an Instrumentation. Zero values mean the globals.
type Options struct {
	// TracerProvider makes the spans; nil: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments; nil: otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator writes and reads the trace context in message
	// properties; nil: propagation.TraceContext{} (W3C).
	Propagator propagation.TextMapPropagator
}

// Instrumentation holds the tracer, the meter and the instruments.
type Instrumentation struct {
	tracer trace.Tracer
	meter  metric.Meter
	prop   propagation.TextMapPropagator

	sendDur, consumeDur metric.Float64Histogram
	sent, consumed      metric.Int64Counter
}

// New returns an Instrumentation.
func New(o Options) (*Instrumentation, error) {
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	if o.Propagator == nil {
		o.Propagator = propagation.TraceContext{}
	}
	i := &Instrumentation{tracer: o.TracerProvider.Tracer(ScopeName), meter: o.MeterProvider.Meter(ScopeName), prop: o.Propagator}
	var err error
	if i.sendDur, err = i.meter.Float64Histogram("mqlite.send.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a send's start until its message is stored")); err != nil {
		return nil, fmt.Errorf("otelmqlite: %w", err)
	}
	if i.consumeDur, err = i.meter.Float64Histogram("mqlite.consume.duration", metric.WithUnit("s"),
		metric.WithDescription("Run time of a push consumer's handler call")); err != nil {
		return nil, fmt.Errorf("otelmqlite: %w", err)
	}
	if i.sent, err = i.meter.Int64Counter("mqlite.messages.sent", metric.WithUnit("{message}"),
		metric.WithDescription("Messages sent, by result")); err != nil {
		return nil, fmt.Errorf("otelmqlite: %w", err)
	}
	if i.consumed, err = i.meter.Int64Counter("mqlite.messages.consumed", metric.WithUnit("{message}"),
		metric.WithDescription("Messages handed to consumers, by result")); err != nil {
		return nil, fmt.Errorf("otelmqlite: %w", err)
	}
	return i, nil
}

// Hooks returns the hooks that trace and time sends and deliveries: set
// them on mqlite.Options.Hooks (every producer and consumer of the store),
// or on a ProducerOptions' or ConsumerOptions' Hooks.
func (i *Instrumentation) Hooks() mqlite.Hooks {
	return mqlite.Hooks{
		BeforeSend:    i.beforeSend,
		AfterSend:     i.afterSend,
		BeforeConsume: i.beforeConsume,
		AfterConsume:  i.afterConsume,
		Retry:         func(e mqlite.RetryEvent) { i.mark("retry", e.Group, e.Message, e.Attempt) },
		DeadLetter:    func(e mqlite.RetryEvent) { i.mark("dead letter", e.Group, e.Message, e.Attempt) },
		Redrive:       i.redrive,
	}
}

// carrier adapts message properties to the propagator.
type carrier map[string]string

func (c carrier) Get(k string) string { return c[k] }
func (c carrier) Set(k, v string)     { c[k] = v }
func (c carrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}
