package otelmqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mqlite/mqlite"
)

// storeInstruments are the observable instruments of ObserveStore.
type storeInstruments struct {
	stored, read, flushes, hookPanics             metric.Int64ObservableCounter
	putRate, getRate                              metric.Float64ObservableGauge
	flushLatency                                  metric.Float64ObservableGauge
	lag, dead, diskUsed, diskTotal, logBytes, txs metric.Int64ObservableGauge
	queueMessages                                 metric.Int64ObservableGauge
}

// ObserveStore registers the store's metrics with the meter: at each
// collection it reads s.Stats once. Unregister the registration before
// closing the store (a collection of a closed store observes nothing).
func (i *Instrumentation) ObserveStore(s *mqlite.Store) (metric.Registration, error) {
	if s == nil {
		return nil, fmt.Errorf("otelmqlite: nil store: %w", mqlite.ErrInvalidArgument)
	}
	var in storeInstruments
	m := i.meter
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	in.stored, err = m.Int64ObservableCounter("mqlite.messages.stored", metric.WithUnit("{message}"), metric.WithDescription("Messages stored since Open"))
	add(err)
	in.read, err = m.Int64ObservableCounter("mqlite.messages.read", metric.WithUnit("{message}"), metric.WithDescription("Messages read since Open"))
	add(err)
	in.flushes, err = m.Int64ObservableCounter("mqlite.commitlog.flushes", metric.WithUnit("{sync}"), metric.WithDescription("CommitLog flushes (syncs) since Open"))
	add(err)
	in.hookPanics, err = m.Int64ObservableCounter("mqlite.hook.panics", metric.WithUnit("{panic}"), metric.WithDescription("Hook calls that panicked"))
	add(err)
	in.putRate, err = m.Float64ObservableGauge("mqlite.put.rate", metric.WithUnit("{message}/s"), metric.WithDescription("Messages stored per second, over the last second"))
	add(err)
	in.getRate, err = m.Float64ObservableGauge("mqlite.get.rate", metric.WithUnit("{message}/s"), metric.WithDescription("Messages read per second, over the last second"))
	add(err)
	in.flushLatency, err = m.Float64ObservableGauge("mqlite.flush.latency", metric.WithUnit("s"), metric.WithDescription("CommitLog flush duration over the last 1024 flushes, by quantile (0.5, 0.99, 1)"))
	add(err)
	in.lag, err = m.Int64ObservableGauge("mqlite.consumer.lag", metric.WithUnit("{message}"), metric.WithDescription("Messages not yet committed by a group, per queue"))
	add(err)
	in.dead, err = m.Int64ObservableGauge("mqlite.dlq.messages", metric.WithUnit("{message}"), metric.WithDescription("Messages in a group's dead-letter queue"))
	add(err)
	in.diskUsed, err = m.Int64ObservableGauge("mqlite.disk.used", metric.WithUnit("By"), metric.WithDescription("Bytes used on the store's volume"))
	add(err)
	in.diskTotal, err = m.Int64ObservableGauge("mqlite.disk.total", metric.WithUnit("By"), metric.WithDescription("Size of the store's volume"))
	add(err)
	in.logBytes, err = m.Int64ObservableGauge("mqlite.commitlog.size", metric.WithUnit("By"), metric.WithDescription("Bytes of the CommitLog still stored"))
	add(err)
	in.txs, err = m.Int64ObservableGauge("mqlite.transactions.pending", metric.WithUnit("{transaction}"), metric.WithDescription("Half messages not yet resolved"))
	add(err)
	in.queueMessages, err = m.Int64ObservableGauge("mqlite.queue.messages", metric.WithUnit("{message}"), metric.WithDescription("Messages stored in a topic's queues"))
	add(err)
	for _, e := range errs {
		if e != nil {
			return nil, fmt.Errorf("otelmqlite: %w", e)
		}
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error { return in.observe(s, o) },
		in.stored, in.read, in.flushes, in.hookPanics, in.putRate, in.getRate, in.flushLatency, in.lag, in.dead,
		in.diskUsed, in.diskTotal, in.logBytes, in.txs, in.queueMessages)
}

func (in *storeInstruments) observe(s *mqlite.Store, o metric.Observer) error {
	st, err := s.Stats()
	if err != nil {
		if errors.Is(err, mqlite.ErrClosed) {
			return nil // nothing to observe
		}
		return err
	}
	t := st.Throughput
	o.ObserveInt64(in.stored, t.Puts)
	o.ObserveInt64(in.read, t.Gets)
	o.ObserveInt64(in.flushes, t.Flushes)
	o.ObserveInt64(in.hookPanics, st.HookPanics)
	o.ObserveFloat64(in.putRate, t.PutTPS)
	o.ObserveFloat64(in.getRate, t.GetTPS)
	for q, d := range map[float64]float64{0.5: t.FlushP50.Seconds(), 0.99: t.FlushP99.Seconds(), 1: t.FlushMax.Seconds()} {
		o.ObserveFloat64(in.flushLatency, d, metric.WithAttributes(attribute.Float64("quantile", q)))
	}
	o.ObserveInt64(in.logBytes, st.CommitLog.WrotePosition-st.CommitLog.MinOffset)
	o.ObserveInt64(in.txs, int64(st.PendingTransactions))
	if st.Disk.Known {
		o.ObserveInt64(in.diskUsed, int64(st.Disk.Used))
		o.ObserveInt64(in.diskTotal, int64(st.Disk.Total))
	}
	for _, g := range st.Groups {
		for _, q := range g.Queues {
			attrs := []attribute.KeyValue{attrGroup.String(g.Name), attrDestination.String(q.Topic), attrQueue.Int(q.ID)}
			if q.Instance != "" {
				attrs = append(attrs, attrMember.String(q.Instance))
			}
			o.ObserveInt64(in.lag, q.Lag, metric.WithAttributes(attrs...))
		}
	}
	for _, tp := range st.Topics {
		if group, ok := strings.CutPrefix(tp.Name, "%DLQ%"); ok {
			o.ObserveInt64(in.dead, tp.Messages, metric.WithAttributes(attrGroup.String(group)))
		}
		for _, q := range tp.Queues {
			o.ObserveInt64(in.queueMessages, q.Messages, metric.WithAttributes(attrDestination.String(tp.Name), attrQueue.Int(q.ID)))
		}
	}
	return nil
}
