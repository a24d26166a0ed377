// Package replication carries mqlite replication over TCP: Serve accepts
// replicas for a primary, Follow dials a primary for a replica and
// reconnects with backoff, and Pipe links two stores in one process
// (tests, demos). It uses only the standard library: a *mqlite.Store is
// both a Primary and a Follower, and any other implementation of the two
// methods works too.
//
// The stream is whatever net.Conn the listener or dialer gives: for TLS
// pass a tls.Listener to Serve, and a Dial that returns a *tls.Conn to
// Follow. The replication protocol itself has checksums on every chunk
// but neither encrypts nor authenticates; a replica of the wrong store is
// refused by its store ID, not by any secret.
//
//	// primary
//	ln, _ := net.Listen("tcp", ":7910")
//	go replication.Serve(ctx, ln, primary, nil)
//
//	// replica (opened with Options{Role: mqlite.Replica})
//	go replication.Follow(ctx, "primary-host:7910", replica, nil)
package replication

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Primary serves replicas: *mqlite.Store.
type Primary interface {
	ServeReplica(ctx context.Context, conn io.ReadWriteCloser) error
}

// Follower follows a primary: *mqlite.Store opened as a replica.
type Follower interface {
	ReplicateFrom(ctx context.Context, conn io.ReadWriteCloser) error
}

// ServeOptions configure Serve. A nil *ServeOptions means the defaults.
type ServeOptions struct {
	// OnSession is called with each session's end (nil: ignored).
	OnSession func(remote net.Addr, err error)
	// Logger receives one line per session end; nil discards.
	Logger *slog.Logger
}

// Serve accepts connections on ln and serves each with p.ServeReplica, in
// a goroutine per connection, until ctx ends or ln fails. It closes ln,
// waits for the sessions to end and returns ctx's error or ln's.
func Serve(ctx context.Context, ln net.Listener, p Primary, o *ServeOptions) error {
	if ln == nil || p == nil {
		return errors.New("mqlite/replication: Serve: nil listener or primary")
	}
	var opts ServeOptions
	if o != nil {
		opts = *o
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			ln.Close()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.ServeReplica(ctx, conn)
			opts.Logger.Info("mqlite/replication: replica session ended", "remote", conn.RemoteAddr(), "err", err)
			if opts.OnSession != nil {
				opts.OnSession(conn.RemoteAddr(), err)
			}
		}()
	}
}

// Listen is Serve on a new TCP listener at addr.
func Listen(ctx context.Context, addr string, p Primary, o *ServeOptions) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, p, o)
}

// FollowOptions configure Follow. A nil *FollowOptions means the defaults.
type FollowOptions struct {
	// Dial opens the stream to the primary; default a TCP dial of addr
	// with a 10 s timeout. Return a *tls.Conn here for TLS.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// MinBackoff and MaxBackoff bound the wait between attempts, which
	// doubles after each failure (with jitter) and starts again from
	// MinBackoff after a session that streamed; defaults 100 ms and 10 s.
	MinBackoff, MaxBackoff time.Duration
	// GiveUp says whether an error ends Follow instead of a retry; by
	// default none does (a refused replica is refused again, so pass
	// one that stops on mqlite.ErrReplicaIdentity and
	// mqlite.ErrReplicaDiverged, as cmd/mqlite does).
	GiveUp func(error) bool
	// OnError is called with each failed attempt (nil: ignored).
	OnError func(error)
	// Logger receives one line per failed attempt; nil discards.
	Logger *slog.Logger
}

func (o *FollowOptions) fill() {
	if o.Dial == nil {
		o.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: 10 * time.Second}
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(10*time.Second, o.MinBackoff)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Follow keeps f following the primary at addr: it dials, runs
// f.ReplicateFrom, and after a failure waits (backoff) and dials again,
// until ctx ends (it returns ctx's error) or GiveUp accepts an error (it
// returns that error).
func Follow(ctx context.Context, addr string, f Follower, o *FollowOptions) error {
	if f == nil {
		return errors.New("mqlite/replication: Follow: nil follower")
	}
	var opts FollowOptions
	if o != nil {
		opts = *o
	}
	opts.fill()
	wait := opts.MinBackoff
	for {
		start := time.Now()
		conn, err := opts.Dial(ctx, addr)
		if err == nil {
			err = f.ReplicateFrom(ctx, conn)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if opts.GiveUp != nil && opts.GiveUp(err) {
			return err
		}
		opts.Logger.Warn("mqlite/replication: following the primary failed; retrying", "addr", addr, "err", err, "wait", wait)
		if opts.OnError != nil {
			opts.OnError(err)
		}
		if time.Since(start) > opts.MaxBackoff {
			wait = opts.MinBackoff // it streamed for a while: a new failure
		}
		t := time.NewTimer(wait + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, opts.MaxBackoff)
	}
}

// Pipe links p and f in process over a net.Pipe and returns a function
// that ends the session and returns both sides' errors.
func Pipe(ctx context.Context, p Primary, f Follower) (stop func() (primaryErr, followerErr error)) {
	ctx, cancel := context.WithCancel(ctx)
	a, b := net.Pipe()
	pe, fe := make(chan error, 1), make(chan error, 1)
	go func() { pe <- p.ServeReplica(ctx, a) }()
	go func() { fe <- f.ReplicateFrom(ctx, b) }()
	return func() (error, error) {
		cancel()
		return <-pe, <-fe
	}
}
