package flush

import (
	"log/slog"
	"sync"
	"time"

	"github.com/mqlite/mqlite/clock"
)

// PeriodicOptions configure a Periodic flusher. Zero values mean
// RocketMQ's defaults.
type PeriodicOptions struct {
	Interval         time.Duration // default 500 ms
	LeastPages       int           // default 4 (16 KiB dirty); negative = any
	ThoroughInterval time.Duration // default 10 s
	Clock            clock.Clock
	Logger           *slog.Logger
	OnFlush          func(flushed int64)
}

// Periodic flushes in the background for FlushAsync.
type Periodic struct {
	f    Flusher
	opts PeriodicOptions
	kick chan struct{}
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

// NewPeriodic starts the periodic flusher goroutine.
func NewPeriodic(f Flusher, opts PeriodicOptions) *Periodic {
	if opts.Interval <= 0 {
		opts.Interval = 500 * time.Millisecond
	}
	if opts.LeastPages == 0 {
		opts.LeastPages = 4
	}
	if opts.ThoroughInterval <= 0 {
		opts.ThoroughInterval = 10 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Periodic{f: f, opts: opts, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

// Threshold is the dirty byte count above which Notify wakes the flusher.
func (p *Periodic) Threshold() int64 { return int64(max(p.opts.LeastPages, 0)) * 4096 }

// Notify wakes the flusher early; the store calls it when more than
// Threshold bytes are dirty. It never blocks.
func (p *Periodic) Notify() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *Periodic) loop() {
	defer close(p.done)
	tick := p.opts.Clock.NewTicker(p.opts.Interval)
	defer tick.Stop()
	last := p.opts.Clock.Now()
	for {
		select {
		case <-tick.C():
		case <-p.kick:
		case <-p.quit:
			p.flush()
			return
		}
		now := p.opts.Clock.Now()
		dirty := p.f.WrotePosition() - p.f.FlushedPosition()
		if dirty <= 0 {
			continue
		}
		if dirty >= p.Threshold() || now.Sub(last) >= p.opts.ThoroughInterval {
			p.flush()
			last = now
		}
	}
}

func (p *Periodic) flush() {
	flushed, err := p.f.Flush()
	if err != nil {
		p.opts.Logger.Error("mqlite/flush: background flush failed; the store is fenced", "err", err)
		return
	}
	if p.opts.OnFlush != nil {
		p.opts.OnFlush(flushed)
	}
}

// Close flushes everything and stops the goroutine. Idempotent.
func (p *Periodic) Close() {
	p.once.Do(func() { close(p.quit) })
	<-p.done
}
