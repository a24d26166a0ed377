package message

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
)

// Pool recycles the blocks that its Batches decode messages into, so that
// a consumer which hands each message back with Release, once nothing
// refers to it any more, decodes with no allocation at all: a stream of
// messages then costs the garbage collector nothing. A message from a Pool
// stays valid until it is released; afterwards its memory, including its
// Body and its strings (Topic, Tags, MsgID, ...), belongs to other
// messages. Clone copies what has to outlive Release. A message never
// released is simply collected with its block, so forgetting Release
// costs memory reuse, never correctness. A Pool is safe for concurrent
// use; the zero Pool is ready to use.
type Pool struct {
	blocks sync.Pool // *block, refs 0, exts cleared
	// idle holds the Batches not in use, each with what is left of its
	// block; a plain list, not a sync.Pool, which could drop a Batch and
	// with it the block's reference, so that the block would never be
	// recycled. There are never more than the most Gets at once.
	mu   sync.Mutex
	idle []*Batch
}

// block is one array of MessageExt and one byte block of a Pool. refs
// counts the messages carved from it that are not yet released, plus one
// while a Batch carves from it.
type block struct {
	refs atomic.Int32
	exts []MessageExt
	buf  []byte
	pool *Pool
}

// Get returns a Batch that decodes into p's recycled blocks.
func (p *Pool) Get() *Batch {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		b := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		return b
	}
	return &Batch{pool: p}
}

// Put hands b back for a later Get; b must come from p's Get, and the
// caller must not use it afterwards. The messages it decoded are not
// affected.
func (p *Pool) Put(b *Batch) {
	if b.pool == p {
		p.mu.Lock()
		p.idle = append(p.idle, b)
		p.mu.Unlock()
	}
}

// newBlock is a block with one reference: the Batch's that carves from it.
func (p *Pool) newBlock() *block {
	blk, ok := p.blocks.Get().(*block)
	if !ok {
		blk = &block{exts: make([]MessageExt, extsPerBlock), buf: make([]byte, blockBytes), pool: p}
	}
	blk.refs.Store(1)
	return blk
}

// unref drops one reference; the last one clears the messages (so that
// what they point to can be collected) and returns the block to its pool.
func (blk *block) unref() {
	if blk.refs.Add(-1) == 0 {
		clear(blk.exts)
		blk.pool.blocks.Put(blk)
	}
}

// Release hands m's memory back to the Pool whose Batch decoded it; m and
// everything reachable from it (Body, strings, Keys) must not be used
// afterwards, by anyone. It does nothing for a message not decoded from a
// Pool (such as Decode's, or a Clone), nor for one already released
// through the same pointer.
func Release(m *MessageExt) {
	if blk := m.blk; blk != nil {
		m.blk = nil
		blk.unref()
	}
}

// Clone returns a deep copy of m that shares no memory with it: it stays
// valid after m is released or changed.
func (m *MessageExt) Clone() *MessageExt {
	c := *m
	c.blk = nil
	c.Topic = strings.Clone(m.Topic)
	c.Tags = strings.Clone(m.Tags)
	c.UniqKey = strings.Clone(m.UniqKey)
	c.ShardingKey = strings.Clone(m.ShardingKey)
	c.DedupID = strings.Clone(m.DedupID)
	c.MsgID = strings.Clone(m.MsgID)
	c.Body = bytes.Clone(m.Body)
	if m.Keys != nil {
		c.Keys = make([]string, len(m.Keys))
		for i, k := range m.Keys {
			c.Keys[i] = strings.Clone(k)
		}
	}
	if m.Properties != nil {
		c.Properties = make(map[string]string, len(m.Properties))
		for k, v := range m.Properties {
			c.Properties[strings.Clone(k)] = strings.Clone(v)
		}
	}
	return &c
}
