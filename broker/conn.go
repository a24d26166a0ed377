package broker

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/broker/remoting"
)

// conn is one client connection: a reader goroutine that decodes frames
// and starts a goroutine per request (at most MaxPendingPerConn at once),
// and a writer goroutine that owns the socket's write side.
type conn struct {
	b       *Broker
	nc      net.Conn
	remote  string
	out     chan []byte
	done    chan struct{}
	drain   chan struct{} // closed by Shutdown: write what is queued, then close
	pending chan struct{}
	once    sync.Once
	dOnce   sync.Once
	id      atomic.Pointer[string] // client ID, from the first heartbeat
	bytes   atomic.Int64           // request bytes being served
}

func newConn(b *Broker, nc net.Conn) *conn {
	return &conn{
		b:       b,
		nc:      nc,
		remote:  nc.RemoteAddr().String(),
		out:     make(chan []byte, 64),
		done:    make(chan struct{}),
		drain:   make(chan struct{}),
		pending: make(chan struct{}, b.opts.MaxPendingPerConn),
	}
}

func (c *conn) clientID() string {
	if p := c.id.Load(); p != nil {
		return *p
	}
	return ""
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		c.nc.Close()
	})
}

// closeAfterDrain makes the writer send the responses already queued,
// then close the connection.
func (c *conn) closeAfterDrain() { c.dOnce.Do(func() { close(c.drain) }) }

func (c *conn) readLoop() {
	defer c.b.connWG.Done()
	defer c.b.removeConn(c)
	graceful := false
	defer func() {
		if graceful {
			c.closeAfterDrain()
		} else {
			c.close()
		}
	}()
	r := bufio.NewReaderSize(c.nc, 64<<10)
	log := c.b.opts.Logger
	for {
		if err := c.nc.SetReadDeadline(time.Now().Add(c.b.opts.IdleTimeout)); err != nil {
			return
		}
		frame, err := remoting.ReadFrame(r, c.b.opts.MaxFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Warn("mqlite broker: closing connection", "remote", c.remote, "err", err)
			}
			return
		}
		req, err := remoting.Decode(frame)
		if err != nil {
			log.Warn("mqlite broker: closing connection", "remote", c.remote, "err", err)
			return
		}
		if req.IsResponse() {
			continue // answers to the broker's oneway requests
		}
		if !c.b.beginRequest() { // shutting down: say so, then close
			c.reply(req, remoting.NewResponse(req, resServiceNotAvailable, "broker shutting down"))
			graceful = true
			return
		}
		size := int64(len(frame))
		if c.bytes.Add(size) > int64(c.b.opts.MaxPendingBytesPerConn) {
			c.bytes.Add(-size)
			c.b.inflight.Done()
			c.reply(req, remoting.NewResponse(req, resSystemBusy, "too many pending request bytes on this connection"))
			continue
		}
		select {
		case c.pending <- struct{}{}:
			go c.serve(req, size)
		default:
			c.bytes.Add(-size)
			c.b.inflight.Done()
			c.reply(req, remoting.NewResponse(req, resSystemBusy, "too many pending requests on this connection"))
		}
	}
}

func (c *conn) serve(req *remoting.Command, size int64) {
	defer func() { c.bytes.Add(-size); <-c.pending; c.b.inflight.Done() }()
	resp := c.b.dispatch(c, req)
	c.reply(req, resp)
}

func (c *conn) reply(req *remoting.Command, resp *remoting.Command) {
	if resp == nil || req.IsOneway() {
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag |= remoting.FlagResponse
	c.send(resp)
}

// send queues cmd for the writer; it gives up when the connection closes.
func (c *conn) send(cmd *remoting.Command) bool {
	frame, err := remoting.Encode(cmd)
	if err != nil {
		c.b.opts.Logger.Error("mqlite broker: encode", "err", err)
		return false
	}
	select {
	case c.out <- frame:
		return true
	case <-c.done:
		return false
	}
}

var brokerOpaque atomic.Int32

// notify sends a oneway request from the broker to the client.
func (c *conn) notify(code int, fields map[string]string, body []byte) bool {
	return c.send(&remoting.Command{
		Code: code, Language: "GO", Version: 317,
		Opaque: brokerOpaque.Add(1), Flag: remoting.FlagOneway,
		ExtFields: fields, Body: body,
	})
}

func (c *conn) writeLoop() {
	defer c.b.connWG.Done()
	w := bufio.NewWriterSize(c.nc, 64<<10)
	for {
		select {
		case <-c.done:
			return
		case <-c.drain:
			if c.writeQueued(w, nil) {
				w.Flush()
			}
			c.close()
			return
		case frame := <-c.out:
			if !c.writeQueued(w, frame) || w.Flush() != nil {
				c.close()
				return
			}
		}
	}
}

// writeQueued writes frame (if any) and every frame queued behind it into
// w, so that a burst of responses costs one flush.
func (c *conn) writeQueued(w *bufio.Writer, frame []byte) bool {
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.b.opts.IdleTimeout)); err != nil {
		return false
	}
	if frame != nil {
		if _, err := w.Write(frame); err != nil {
			return false
		}
	}
	for {
		select {
		case f := <-c.out:
			if _, err := w.Write(f); err != nil {
				return false
			}
		default:
			return true
		}
	}
}
