package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/broker/remoting"
)

// ErrClosed: the broker was shut down.
var ErrClosed = errors.New("mqlite/broker: closed")

type handler func(c *conn, req *remoting.Command) *remoting.Command

// Broker serves one mqlite.Store over RocketMQ's remoting protocol, as
// both the name server and the (only) broker of a one-broker cluster.
type Broker struct {
	store *mqlite.Store
	opts  Options
	ln    net.Listener
	addr  string   // advertised host:port
	host  struct { // addr as message IDs and stored messages carry it
		ip   []byte
		port int32
		v6   bool
	}
	handlers map[int]handler

	ctx    context.Context // cancelled by Shutdown: long polls end
	cancel context.CancelFunc

	clients     *registry
	locks       *lockTable
	txns        *txnBridge
	filters     sync.Map // "type\x00expr" -> filter or error
	filterCount atomic.Int64

	inflight sync.WaitGroup // requests being served
	connWG   sync.WaitGroup // connection goroutines and the accept loop
	mu       struct {
		sync.Mutex
		conns  map[*conn]struct{}
		closed bool
	}
}

// Listen opens the listener of a broker serving store and starts
// accepting. The caller keeps ownership of store (close it after
// Shutdown) unless Options.CloseStore hands it to the broker.
func Listen(store *mqlite.Store, opts *Options) (*Broker, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("mqlite/broker: listen %s: %w", o.Addr, err)
	}
	if o.TLS != nil {
		ln = tls.NewListener(ln, o.TLS)
	}
	b := &Broker{store: store, opts: o, ln: ln, addr: o.AdvertiseAddr}
	if b.addr == "" {
		b.addr = ln.Addr().String()
	}
	b.host.ip, b.host.port, b.host.v6 = hostBytes(b.addr)
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.mu.conns = map[*conn]struct{}{}
	b.clients = newRegistry(b)
	b.locks = newLockTable()
	b.txns = newTxnBridge(b)
	b.handlers = b.routes()
	b.connWG.Add(1)
	go b.acceptLoop()
	o.Logger.Info("mqlite broker listening", "addr", ln.Addr().String(), "tls", o.TLS != nil, "acl", o.ACL != nil)
	return b, nil
}

// Addr returns the address clients use (the listener's, or AdvertiseAddr).
func (b *Broker) Addr() string { return b.addr }

func (b *Broker) routes() map[int]handler {
	return map[int]handler{
		reqGetRouteInfoByTopic:     b.handleRoute,
		reqGetBrokerClusterInfo:    b.handleClusterInfo,
		reqGetAllTopicList:         b.handleTopicList,
		reqCreateTopic:             b.handleCreateTopic,
		reqSendMessage:             b.handleSend,
		reqSendMessageV2:           b.handleSend,
		reqSendBatchMessage:        b.handleSend,
		reqPullMessage:             b.handlePull,
		reqQueryConsumerOffset:     b.handleQueryOffset,
		reqUpdateConsumerOffset:    b.handleUpdateOffset,
		reqGetMaxOffset:            b.handleMaxOffset,
		reqGetMinOffset:            b.handleMinOffset,
		reqSearchOffsetByTimestamp: b.handleSearchOffset,
		reqHeartBeat:               b.handleHeartbeat,
		reqUnregisterClient:        b.handleUnregister,
		reqGetConsumerListByGroup:  b.handleConsumerList,
		reqLockBatchMQ:             b.handleLock,
		reqUnlockBatchMQ:           b.handleUnlock,
		reqConsumerSendMsgBack:     b.handleSendBack,
		reqEndTransaction:          b.handleEndTransaction,
		reqQueryMessage:            b.handleQueryMessage,
		reqViewMessageByID:         b.handleViewMessage,
		reqGetBrokerRuntimeInfo:    b.handleRuntimeInfo,
		reqSendReplyMessage:        b.handleSendReply,
		reqSendReplyMessageV2:      b.handleSendReply,
	}
}

func (b *Broker) acceptLoop() {
	defer b.connWG.Done()
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			if b.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			b.opts.Logger.Error("mqlite broker: accept", "err", err)
			return
		}
		b.mu.Lock()
		if b.mu.closed || len(b.mu.conns) >= b.opts.MaxConns {
			full := !b.mu.closed
			b.mu.Unlock()
			if full {
				b.opts.Logger.Warn("mqlite broker: connection limit reached", "remote", nc.RemoteAddr().String(), "max", b.opts.MaxConns)
			}
			nc.Close()
			continue
		}
		c := newConn(b, nc)
		b.mu.conns[c] = struct{}{}
		b.connWG.Add(2)
		b.mu.Unlock()
		go c.readLoop()
		go c.writeLoop()
	}
}

func (b *Broker) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.closed
}

// beginRequest counts a request in flight unless the broker is shutting
// down (Shutdown waits for the count only after closing, so no Add races
// its Wait).
func (b *Broker) beginRequest() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return false
	}
	b.inflight.Add(1)
	return true
}

func (b *Broker) removeConn(c *conn) {
	b.mu.Lock()
	delete(b.mu.conns, c)
	b.mu.Unlock()
	b.clients.dropConn(c)
	b.locks.dropClient(c.clientID())
}

// Shutdown stops accepting, ends long polls, waits for the requests in
// flight to finish (or ctx to end), answers them, then closes every
// connection and waits for their goroutines. It closes the Store only
// with Options.CloseStore. A second call returns ErrClosed.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	b.mu.closed = true
	b.mu.Unlock()
	err := b.ln.Close()
	b.cancel()
	done := make(chan struct{})
	go func() { b.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, ctx.Err())
	}
	b.mu.Lock()
	conns := make([]*conn, 0, len(b.mu.conns))
	for c := range b.mu.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.closeAfterDrain()
	}
	b.connWG.Wait()
	<-done
	b.txns.close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if b.opts.CloseStore {
		err = errors.Join(err, b.store.Close())
	}
	return err
}

// Close shuts the broker down without waiting for requests in flight
// beyond their cancellation.
func (b *Broker) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := b.Shutdown(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

func (b *Broker) dispatch(c *conn, req *remoting.Command) *remoting.Command {
	h := b.handlers[req.Code]
	if h == nil {
		b.opts.Logger.Debug("mqlite broker: request code not supported", "code", req.Code, "remote", c.remote)
		return remoting.NewResponse(req, resNotSupported, fmt.Sprintf("request type %d not supported", req.Code))
	}
	if resp := b.checkACL(c, req); resp != nil {
		return resp
	}
	resp := h(c, req)
	if resp != nil && resp.Code != resSuccess && resp.Code != resPullNotFound {
		b.opts.Logger.Debug("mqlite broker: request refused", "code", req.Code, "response", resp.Code, "remark", resp.Remark, "remote", c.remote)
	}
	return resp
}
