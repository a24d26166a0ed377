package otelmqlite

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/mqlite/mqlite"
)

// Attribute keys, after OpenTelemetry's messaging conventions.
const (
	attrSystem      = attribute.Key("messaging.system")
	attrOperation   = attribute.Key("messaging.operation.type")
	attrDestination = attribute.Key("messaging.destination.name")
	attrMessageID   = attribute.Key("messaging.message.id")
	attrBatch       = attribute.Key("messaging.batch.message_count")
	attrGroup       = attribute.Key("messaging.consumer.group.name")
	attrQueue       = attribute.Key("mqlite.queue")
	attrOffset      = attribute.Key("mqlite.queue_offset")
	attrAttempt     = attribute.Key("mqlite.reconsume_times")
	attrResult      = attribute.Key("mqlite.result")
	attrMember      = attribute.Key("mqlite.member")
)

var system = attrSystem.String("mqlite")

func (i *Instrumentation) beforeSend(ctx context.Context, m *mqlite.Message) context.Context {
	ctx, _ = i.tracer.Start(ctx, "send "+m.Topic, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(system, attrOperation.String("send"), attrDestination.String(m.Topic)))
	if m.Properties == nil {
		m.Properties = map[string]string{}
	}
	i.prop.Inject(ctx, carrier(m.Properties))
	return ctx
}

func (i *Instrumentation) afterSend(ctx context.Context, e mqlite.SendEvent) {
	result := "ok"
	span := trace.SpanFromContext(ctx)
	if e.Err != nil {
		result = "error"
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, e.Err.Error())
	} else {
		span.SetAttributes(attrMessageID.String(e.Result.MsgID()), attrQueue.Int(e.Result.QueueID), attrOffset.Int64(e.Result.QueueOffset))
	}
	if e.Batch > 0 {
		span.SetAttributes(attrBatch.Int(e.Batch))
	}
	span.End()
	attrs := metric.WithAttributes(attrDestination.String(e.Message.Topic), attrResult.String(result))
	i.sent.Add(context.Background(), 1, attrs)
	i.sendDur.Record(context.Background(), e.Duration.Seconds(), attrs)
}

// origin is the span context a message's properties carry (invalid when
// none).
func (i *Instrumentation) origin(m *mqlite.MessageExt) trace.SpanContext {
	if len(m.Properties) == 0 {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(i.prop.Extract(context.Background(), carrier(m.Properties)))
}

// topicOf is the topic a message was sent to (a retried or dead one keeps
// it in a property).
func topicOf(m *mqlite.MessageExt) string {
	if t := m.Properties[mqlite.PropRetryTopic]; t != "" {
		return t
	}
	return m.Topic
}

func (i *Instrumentation) beforeConsume(ctx context.Context, e mqlite.ConsumeEvent) context.Context {
	if len(e.Messages) == 0 {
		return ctx
	}
	links := make([]trace.Link, 0, len(e.Messages))
	for _, m := range e.Messages {
		if sc := i.origin(m); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	first := e.Messages[0]
	op := "process"
	if e.Pull {
		op = "receive"
	}
	attrs := []attribute.KeyValue{system, attrOperation.String(op), attrDestination.String(topicOf(first)),
		attrGroup.String(e.Group), attrMember.String(e.Member), attrBatch.Int(len(e.Messages))}
	if len(e.Messages) == 1 {
		attrs = append(attrs, attrMessageID.String(first.MsgID), attrQueue.Int(first.QueueID),
			attrOffset.Int64(first.QueueOffset), attrAttempt.Int(int(first.ReconsumeTimes)))
		if sc := i.origin(first); sc.IsValid() {
			// The producer span is the parent: the trace goes on through
			// the store, whatever the handler's context was.
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	ctx, span := i.tracer.Start(ctx, op+" "+topicOf(first), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...), trace.WithAttributes(attrs...))
	if e.Pull {
		span.End()
		i.consumed.Add(context.Background(), int64(len(e.Messages)), metric.WithAttributes(attrGroup.String(e.Group), attrResult.String("received")))
	}
	return ctx
}

func (i *Instrumentation) afterConsume(ctx context.Context, e mqlite.ConsumeEvent) {
	span := trace.SpanFromContext(ctx)
	result := "ok"
	if !e.Success {
		result = "error"
		span.SetStatus(codes.Error, "handler asked to reconsume later")
	}
	span.End()
	attrs := metric.WithAttributes(attrGroup.String(e.Group), attrResult.String(result))
	i.consumed.Add(context.Background(), int64(len(e.Messages)), attrs)
	i.consumeDur.Record(context.Background(), e.Duration.Seconds(), attrs)
}

// mark records a zero-length span under the message's producer span.
func (i *Instrumentation) mark(name, group string, m *mqlite.MessageExt, attempt int32) {
	ctx := context.Background()
	if sc := i.origin(m); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	_, span := i.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(system,
		attrGroup.String(group), attrDestination.String(topicOf(m)), attrMessageID.String(m.MsgID), attrAttempt.Int(int(attempt))))
	span.End()
}

func (i *Instrumentation) redrive(e mqlite.RedriveEvent) {
	ctx := context.Background()
	if len(e.Message.Properties) > 0 {
		if sc := trace.SpanContextFromContext(i.prop.Extract(ctx, carrier(e.Message.Properties))); sc.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	_, span := i.tracer.Start(ctx, "redrive", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(system,
		attrGroup.String(e.Group), attrDestination.String(e.Message.Topic), attrMessageID.String(e.Result.MsgID())))
	span.End()
}
