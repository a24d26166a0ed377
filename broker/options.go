package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/broker/remoting"
)

// Defaults of Options.
const (
	DefaultAddr              = "127.0.0.1:10911"
	DefaultBrokerName        = "mqlite"
	DefaultClusterName       = "DefaultCluster"
	DefaultMaxConns          = 1024
	DefaultMaxPendingPerConn = 256
	DefaultIdleTimeout       = 3 * time.Minute
	DefaultMaxSuspend        = 20 * time.Second
	DefaultTopicQueues       = 4
)

// ErrInvalidOptions: Options that cannot work; the error lists every problem.
var ErrInvalidOptions = errors.New("mqlite/broker: invalid options")

// Options configure a Broker. Zero values mean the defaults given.
type Options struct {
	// Addr is the TCP address to listen on; default DefaultAddr, loopback
	// only. Serving other machines is an explicit choice ("0.0.0.0:10911").
	Addr string
	// AdvertiseAddr is the address clients are told to connect to (route
	// data, message IDs); default the listener's address.
	AdvertiseAddr string
	// BrokerName and ClusterName appear in route and cluster data.
	BrokerName  string
	ClusterName string
	// TLS, when set, makes the listener speak TLS (the client's
	// primitive.WithTls / UseTls).
	TLS *tls.Config
	// ACL, when set, requires every request to be signed by an account it
	// knows and checks the account's permissions; see ACL.
	ACL *ACL
	// MaxConns bounds open connections; further ones are closed at once.
	MaxConns int
	// MaxFrame bounds one frame; default remoting.DefaultMaxFrame (16 MiB).
	// A longer frame closes the connection.
	MaxFrame int
	// MaxPendingPerConn bounds the requests of one connection being
	// served at once (a long-polling pull counts); more get SYSTEM_BUSY.
	MaxPendingPerConn int
	// MaxPendingBytesPerConn bounds the request bytes of one connection
	// being served at once (default 64 MiB); more get SYSTEM_BUSY. With
	// MaxFrame it bounds what one client can make the broker hold.
	MaxPendingBytesPerConn int
	// IdleTimeout closes a connection that sent nothing for this long
	// (clients send heartbeats every 30 s).
	IdleTimeout time.Duration
	// MaxSuspend caps how long a pull is held waiting for messages; the
	// default, 20 s, is the Go client's own suspend time (it gives up on a
	// pull after 30 s).
	MaxSuspend time.Duration
	// DefaultTopicQueues is the queue count of topics created because a
	// client asked for their route (TBW102 semantics); default 4.
	DefaultTopicQueues int
	// NoAutoCreateTopics makes route queries for unknown topics fail
	// with TOPIC_NOT_EXIST instead of creating them.
	NoAutoCreateTopics bool
	// DelayLevels must equal the Store's Options.DelayLevels (the broker
	// maps a client's delay level of a retry to a delay); nil means
	// mqlite.DefaultDelayLevels.
	DelayLevels []time.Duration
	// TxEndTimeout is how long a transactional half message waits for the
	// producer's END_TRANSACTION before it is left to the check-back;
	// default 10 s. TxCheckTimeout bounds one check-back round trip;
	// default 5 s.
	TxEndTimeout   time.Duration
	TxCheckTimeout time.Duration
	// CloseStore makes Shutdown (and Close) close the Store last, for a
	// broker that owns it; by default the caller closes it.
	CloseStore bool
	// Logger receives connection and protocol errors; nil discards.
	Logger *slog.Logger
}

func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	var problems []error
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.BrokerName == "" {
		c.BrokerName = DefaultBrokerName
	}
	if c.ClusterName == "" {
		c.ClusterName = DefaultClusterName
	}
	setInt := func(name string, v *int, def int) {
		if *v == 0 {
			*v = def
		} else if *v < 0 {
			problems = append(problems, fmt.Errorf("%s %d is negative", name, *v))
		}
	}
	setInt("MaxConns", &c.MaxConns, DefaultMaxConns)
	setInt("MaxFrame", &c.MaxFrame, remoting.DefaultMaxFrame)
	setInt("MaxPendingPerConn", &c.MaxPendingPerConn, DefaultMaxPendingPerConn)
	setInt("MaxPendingBytesPerConn", &c.MaxPendingBytesPerConn, 64<<20)
	setInt("DefaultTopicQueues", &c.DefaultTopicQueues, DefaultTopicQueues)
	setDur := func(name string, v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		} else if *v < 0 {
			problems = append(problems, fmt.Errorf("%s %s is negative", name, *v))
		}
	}
	setDur("IdleTimeout", &c.IdleTimeout, DefaultIdleTimeout)
	setDur("MaxSuspend", &c.MaxSuspend, DefaultMaxSuspend)
	setDur("TxEndTimeout", &c.TxEndTimeout, 10*time.Second)
	setDur("TxCheckTimeout", &c.TxCheckTimeout, 5*time.Second)
	if c.MaxFrame > 0 && c.MaxFrame < 1024 {
		problems = append(problems, fmt.Errorf("MaxFrame %d is below 1024", c.MaxFrame))
	}
	if c.DelayLevels == nil {
		c.DelayLevels = mqlite.DefaultDelayLevels
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if len(problems) > 0 {
		return c, fmt.Errorf("%w: %w", ErrInvalidOptions, errors.Join(problems...))
	}
	return c, nil
}
