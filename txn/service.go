package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// Defaults of ServiceOptions.
const (
	DefaultCheckInterval = 60 * time.Second
	DefaultTimeout       = 6 * time.Second
	DefaultMaxChecks     = 15
)

// ServiceOptions configure a Service. Zero values mean the defaults given.
type ServiceOptions struct {
	// FS and Dir say where the progress file lives (the store's config
	// directory). Both are required.
	FS  vfs.FS
	Dir string
	// Clock times the check rounds and ages half messages; nil: clock.Real.
	Clock clock.Clock
	// Logger receives warnings (panicking checkers, failed writes,
	// discarded messages); nil discards.
	Logger *slog.Logger
	// CheckInterval is the time between check rounds; default 60 s.
	CheckInterval time.Duration
	// Timeout is the age a half message must reach before its first
	// check-back (PropCheckImmunity may ask for more); default 6 s.
	Timeout time.Duration
	// MaxChecks is the number of check-backs after which a message still
	// unresolved is discarded; default 15.
	MaxChecks int
	// ParkAfterMax moves a discarded message to topic.CheckMax (queue 0)
	// before discarding it, as RocketMQ does, so an operator can inspect it.
	ParkAfterMax bool
	// ReadOnly is for a store opened read-only: Start only replays the
	// queues to count the pending half messages (Pending), no check round
	// ever runs (CheckNow fails with ErrReadOnly), and Close saves nothing.
	ReadOnly bool
	// Stepped is for deterministic tests: Start starts no periodic check
	// round; rounds run from CheckNow and from Step (which runs one when
	// CheckInterval has passed on the clock since the last).
	Stepped bool
	// Seed, when not 0, makes the producers' generated transaction IDs
	// and round-robin starts derive from it (in producer creation order)
	// instead of being random, for repeatable test runs.
	Seed uint64
}

// withDefaults fills in defaults and reports every problem at once.
func (o ServiceOptions) withDefaults() (ServiceOptions, error) {
	var problems []error
	if o.FS == nil {
		problems = append(problems, errors.New("no FS"))
	}
	if o.Dir == "" {
		problems = append(problems, errors.New("no Dir"))
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = DefaultCheckInterval
	}
	if o.CheckInterval < 0 {
		problems = append(problems, fmt.Errorf("negative CheckInterval %s", o.CheckInterval))
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 0 {
		problems = append(problems, fmt.Errorf("negative Timeout %s", o.Timeout))
	}
	if o.MaxChecks == 0 {
		o.MaxChecks = DefaultMaxChecks
	}
	if o.MaxChecks < 0 {
		problems = append(problems, fmt.Errorf("negative MaxChecks %d", o.MaxChecks))
	}
	if len(problems) > 0 {
		return o, fmt.Errorf("mqlite/txn: bad service options: %w: %w", ErrInvalidArgument, errors.Join(problems...))
	}
	return o, nil
}

// Service is the check-back service of one store: it tracks the half
// messages whose outcome is not recorded, asks the checker of their
// producer group about them, and records the answers. It also arbitrates
// between Producers and check-backs so that each half message is resolved
// once. It is safe for concurrent use.
type Service struct {
	// Lock order: round, then mu.
	st   Host
	opts ServiceOptions
	log  *slog.Logger

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop exits

	// round serializes check rounds: catch-up reads, checks and progress
	// writes. Only its holder moves the read cursors.
	round sync.Mutex
	saved progress // last progress written or loaded; guarded by round

	producers atomic.Uint64 // producers made, for their seeds

	nextStep atomic.Int64 // Stepped: unix nanoseconds of the next round Step runs

	mu struct {
		sync.Mutex
		closed   bool
		started  bool
		halfNext int64             // next half queue offset to read
		opNext   int64             // next op queue offset to read
		pending  map[int64]*entry  // unresolved half messages by queue offset
		resolved offsetSet         // resolved here, at or above halfNext (not read yet)
		orphans  map[int64]bool    // committed here, op record not written, at or above halfNext
		local    map[string]int    // unique keys whose local transaction is running
		checkers map[string][]*reg // producer group -> registered checkers, newest last
		groups   map[string]string // interned group names
	}
}

// entry is an unresolved half message. It holds no message data: a check
// reads the message by its CommitLog offset.
type entry struct {
	off     int64     // queue offset in the half queue
	clOff   int64     // CommitLog offset
	opAt    int64     // op queue offset when it was read: no earlier op record names it
	stored  time.Time // store time of the half message
	due     time.Time // first check-back time
	group   string
	uniq    string
	checks  int   // check-backs so far
	counted int64 // op queue offset past the last check record counted

	busy      bool // a check is running
	orphan    bool // the real message is stored, the op record is not
	probed    bool // HasUniqKey was asked once while no checker was registered
	noChecker bool // logged once: group has no checker
}

type reg struct{ c Checker }

// NewService returns the check-back service of st. It loads its progress
// file (a damaged one is an ErrCorrupt naming the file) but reads no
// message before Start or CheckNow. Producers may send before Start;
// nothing is checked back until then.
func NewService(st Host, o ServiceOptions) (*Service, error) {
	if st == nil {
		return nil, fmt.Errorf("mqlite/txn: nil store: %w", ErrInvalidArgument)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := loadProgress(o.FS, o.Dir)
	if err != nil {
		return nil, err
	}
	s := &Service{st: st, opts: o, log: o.Logger, saved: p, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.halfNext, s.mu.opNext = p.Half, p.Op
	s.mu.pending = map[int64]*entry{}
	s.mu.resolved.base = p.Half
	s.mu.orphans = map[int64]bool{}
	s.mu.local = map[string]int{}
	s.mu.checkers = map[string][]*reg{}
	s.mu.groups = map[string]string{}
	return s, nil
}

// Start rebuilds the set of unresolved half messages from the progress
// file's offsets onwards, then starts checking every CheckInterval. A
// second Start does nothing.
func (s *Service) Start() error {
	s.mu.Lock()
	closed, started := s.mu.closed, s.mu.started
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("mqlite/txn: start: %w", ErrClosed)
	}
	if started {
		return nil
	}
	s.round.Lock()
	err := s.clampCursors()
	if err == nil {
		err = s.catchUp()
	}
	s.round.Unlock()
	if err != nil {
		return fmt.Errorf("mqlite/txn: start: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.closed:
		return fmt.Errorf("mqlite/txn: start: %w", ErrClosed)
	case s.mu.started:
		return nil
	}
	s.mu.started = true
	if s.opts.ReadOnly || s.opts.Stepped {
		close(s.done) // no loop (stepped: Step runs the rounds)
		s.nextStep.Store(s.opts.Clock.Now().Add(s.opts.CheckInterval).UnixNano())
		return nil
	}
	// The ticker exists before Start returns, so a fake clock advanced
	// right after Start fires it.
	go s.loop(s.opts.Clock.NewTicker(s.opts.CheckInterval))
	return nil
}

func (s *Service) loop(t clock.Ticker) {
	defer close(s.done)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C():
			if err := s.runRound(s.ctx); err != nil && s.ctx.Err() == nil {
				s.log.Warn("mqlite/txn: check round failed", "err", err)
			}
		}
	}
}

// CheckNow runs one check round now: it reads the half messages and op
// records stored since the last round, checks back every unresolved half
// message that is due, and saves the progress. It waits for a round
// already running. A message whose check fails is logged and retried next
// round while the round goes on; CheckNow returns the first such error, or
// the error that stopped the round.
func (s *Service) CheckNow(ctx context.Context) error {
	if err := errs.CheckContext(ctx, "mqlite/txn: check"); err != nil {
		return err
	}
	if s.isClosed() {
		return fmt.Errorf("mqlite/txn: check: %w", ErrClosed)
	}
	if s.opts.ReadOnly {
		return fmt.Errorf("mqlite/txn: check: %w", ErrReadOnly)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	return s.runRound(ctx)
}

// Pending returns the number of half messages known to be unresolved: read
// by Start or the last round, and not resolved since.
func (s *Service) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.pending)
}

// Register makes checker answer the check-backs of producer group group
// until unregister is called (unregister is idempotent). Several checkers
// may serve one group; the newest answers.
func (s *Service) Register(group string, checker Checker) (unregister func(), err error) {
	if err := topic.ValidateGroup(group); err != nil {
		return nil, fmt.Errorf("mqlite/txn: register: %w", err)
	}
	if checker == nil {
		return nil, fmt.Errorf("mqlite/txn: register group %q: nil checker: %w", group, ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, fmt.Errorf("mqlite/txn: register: %w", ErrClosed)
	}
	r := &reg{c: checker}
	s.mu.checkers[group] = append(s.mu.checkers[group], r)
	var once sync.Once
	return func() { once.Do(func() { s.unregister(group, r) }) }, nil
}

func (s *Service) unregister(group string, r *reg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.mu.checkers[group]
	for i, x := range rs {
		if x == r {
			rs = append(rs[:i:i], rs[i+1:]...)
			break
		}
	}
	if len(rs) == 0 {
		delete(s.mu.checkers, group)
		return
	}
	s.mu.checkers[group] = rs
}

func (s *Service) checkerLocked(group string) Checker {
	if rs := s.mu.checkers[group]; len(rs) > 0 {
		return rs[len(rs)-1].c
	}
	return nil
}

// Close stops the check rounds (a checker running sees its context
// cancelled), then saves the progress. Close is idempotent; afterwards
// every call returns ErrClosed.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	started := s.mu.started
	s.mu.Unlock()
	s.cancel()
	if started {
		<-s.done
	}
	if s.opts.ReadOnly {
		return nil
	}
	s.round.Lock()
	defer s.round.Unlock()
	return s.saveProgress()
}

func (s *Service) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closed
}
