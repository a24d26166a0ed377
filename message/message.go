// Package message owns mqlite's message model and the payload layout of a
// CommitLog record. It is a leaf package: commitlog owns the frame around the
// payload (size, magic, CRC32-C, offsets); this package encodes the payload
// straight into the slice the log hands out, and decodes it again.
//
// Payload layout (little-endian; offsets are from the start of the payload,
// which follows the commitlog frame):
//
//	pos  size  field
//	  0     4  QUEUEID           int32
//	  4     4  FLAG              int32, opaque user value
//	  8     8  QUEUEOFFSET       int64, logical offset in the queue
//	 16     4  SYSFLAG           uint32, see the Sys* constants
//	 20     8  BORNTIMESTAMP     int64, unix ms, producer side
//	 28     8  STORETIMESTAMP    int64, unix ms, set inside the append lock
//	 36     4  RECONSUMETIMES    int32
//	 40     8  PREPAREDTXOFFSET  int64, half-message offset for commit records
//	 48     4  TAGSCODE          uint32, TagsCode(tags); 0 = no tags
//	 52     4  BODYLENGTH        uint32, then the body
//	  …     2  TOPICLENGTH       uint16, then the topic (UTF-8)
//	  …     2  PROPERTIESLENGTH  uint16, then the properties
//
// Properties are name 0x01 value 0x02 pairs, as RocketMQ writes them; the
// message's tags, keys, unique key, sharding key, delay level and
// deliver-at time travel as the reserved properties named by the Prop*
// constants. This differs from RocketMQ's record in three ways, all
// deliberate: no born/store host fields (there is no network), a TAGSCODE
// field so the dispatcher need not parse properties, and little-endian order.
//
// Decoding copies: Decode and DecodeAt fill a MessageExt, a Batch carves
// many from shared blocks, and a Pool's Batches recycle those blocks once
// every message in them is released (Release), for readers that allocate
// nothing per message.
package message

import (
	"time"

	"github.com/cespare/xxhash/v2"
)

// Message is what a producer sends.
type Message struct {
	Topic       string
	Tags        string            // one tag; used by tag filters
	Keys        []string          // business keys, indexed for MessagesByKey; no spaces
	Properties  map[string]string // user properties
	Body        []byte
	Flag        int32     // opaque user value
	ShardingKey string    // same key -> same queue (ordered messages)
	DelayLevel  int       // 1..N delay levels; 0 = none
	DeliverAt   time.Time // deliver at this time; zero = now

	// UniqKey is the client-side unique key; the store sets it if empty.
	UniqKey string
	// DedupID makes the send idempotent: a second send of a message
	// with the same DedupID to the same topic within the store's dedup
	// window (Options.DedupWindow) stores nothing and returns the first
	// send's result with Duplicate set. Empty = no deduplication.
	DedupID string
	// ReconsumeTimes counts deliveries that failed (set by the retry path).
	ReconsumeTimes int32
	// SysFlag carries transaction type and compression bits.
	SysFlag uint32
	// PreparedTxOffset is the half message's offset, for commit records.
	PreparedTxOffset int64
	// BornTimestamp is set by the store if zero.
	BornTimestamp time.Time
}

// MessageExt is a stored message as read back.
type MessageExt struct {
	Message
	// QueueID is an int, as PutResult.QueueID and every queue parameter
	// of the API (the record stores it in 4 bytes).
	QueueID         int
	QueueOffset     int64
	CommitLogOffset int64
	StoreSize       int32
	StoreTimestamp  time.Time
	// MsgID encodes CommitLogOffset; see the function ID. PutResult has
	// the same value as the method MsgID; both types have the method ID,
	// so code can read either the same way.
	MsgID string

	blk *block // the Pool block holding the message, until Release
}

// Sysflag bits, as RocketMQ numbers them.
const (
	SysCompressed  uint32 = 0x1
	SysTxPrepared  uint32 = 0x4
	SysTxCommit    uint32 = 0x8
	SysTxRollback  uint32 = 0xC
	SysTxTypeMask  uint32 = 0xC
	SysCompressZip uint32 = 0x300 // compression type 3 (zlib/flate)
)

// Reserved property names.
const (
	PropTags        = "TAGS"
	PropKeys        = "KEYS"
	PropUniqKey     = "UNIQ_KEY"
	PropShardingKey = "SHARDING_KEY"
	PropDedupID     = "DEDUP_ID"
	PropDelay       = "DELAY"
	PropDeliverAt   = "TIMER_DELIVER_MS"
	PropRealTopic   = "REAL_TOPIC"
	PropRealQueueID = "REAL_QID"
)

// TagsCode is the hash stored in the record and the ConsumeQueue for tag
// filtering: xxhash64 of the tags folded to 32 bits, never 0 for non-empty
// tags; 0 means no tags.
func TagsCode(tags string) uint32 {
	if tags == "" {
		return 0
	}
	h := xxhash.Sum64String(tags)
	c := uint32(h) ^ uint32(h>>32)
	if c == 0 {
		c = 1
	}
	return c
}

// ID returns m.MsgID, under the name PutResult has too (where MsgID is a
// method): m.ID() and r.ID() read the message ID of a read message and of
// a send result alike.
func (m *MessageExt) ID() string { return m.MsgID }
