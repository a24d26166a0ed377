package message

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/mqlite/mqlite/internal/errs"
)

// Payload field positions.
const (
	posQueueID     = 0
	posFlag        = 4
	posQueueOffset = 8
	posSysFlag     = 16
	posBorn        = 20
	posStore       = 28
	posReconsume   = 36
	posPreparedTx  = 40
	posTagsCode    = 48
	posBodyLen     = 52
	posBody        = 56

	// FixedSize is the payload size of a message with empty body, topic
	// and properties.
	FixedSize = posBody + 2 + 2
)

const (
	propNameSep  = 0x01
	propValueSep = 0x02
)

var byteOrder = binary.LittleEndian

// ErrTruncated reports a payload shorter than its length fields say. It
// matches ErrCorrupt.
var ErrTruncated = fmt.Errorf("%w: truncated message payload", errs.ErrCorrupt)

// Meta is what the store decides for a record inside the append lock.
type Meta struct {
	QueueID     int32
	QueueOffset int64
	StoreMs     int64
	BornMs      int64
	// Uniq is used as the unique key when the message has none.
	Uniq []byte
	// Reroute, if set, stores the message under another topic.
	Reroute *Reroute
}

// Reroute stores a message under Topic (a delay or timer topic) with its
// real topic and queue kept in the REAL_TOPIC and REAL_QID properties,
// without copying the message.
type Reroute struct {
	Topic     string
	RealTopic string
	RealQueue string // decimal
}

// PayloadSizeRouted is PayloadSize for a message stored under r.
func PayloadSizeRouted(m *Message, uniqLen int, r *Reroute) int {
	return FixedSize + len(m.Body) + len(r.Topic) + propsSize(m, uniqLen) +
		propSize(PropRealTopic, len(r.RealTopic)) + propSize(PropRealQueueID, len(r.RealQueue))
}

// PayloadSize is the exact size Encode writes for m, given the length of the
// unique key the store generates when m.UniqKey is empty.
func PayloadSize(m *Message, uniqLen int) int {
	return FixedSize + len(m.Body) + len(m.Topic) + propsSize(m, uniqLen)
}

func propSize(name string, valueLen int) int { return len(name) + 2 + valueLen }

func propsSize(m *Message, uniqLen int) int {
	n := 0
	if m.Tags != "" {
		n += propSize(PropTags, len(m.Tags))
	}
	if len(m.Keys) > 0 {
		kl := len(m.Keys) - 1
		for _, k := range m.Keys {
			kl += len(k)
		}
		n += propSize(PropKeys, kl)
	}
	if m.UniqKey != "" {
		uniqLen = len(m.UniqKey)
	}
	if uniqLen > 0 {
		n += propSize(PropUniqKey, uniqLen)
	}
	if m.ShardingKey != "" {
		n += propSize(PropShardingKey, len(m.ShardingKey))
	}
	if m.DedupID != "" {
		n += propSize(PropDedupID, len(m.DedupID))
	}
	if m.DelayLevel > 0 {
		n += propSize(PropDelay, digits(int64(m.DelayLevel)))
	}
	if !m.DeliverAt.IsZero() {
		n += propSize(PropDeliverAt, digits(m.DeliverAt.UnixMilli()))
	}
	if len(m.Properties) > 0 { // ranging over even an empty map costs an iterator
		for k, v := range m.Properties {
			n += propSize(k, len(v))
		}
	}
	return n
}

func digits(v int64) int {
	n := 1
	if v < 0 {
		n++
		v = -v
	}
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// Encode writes m's payload into dst, which must be exactly
// PayloadSize(m, len(meta.Uniq)) bytes. It does not allocate unless m has
// more than one user property (their names are sorted so that equal
// messages encode to equal bytes).
func Encode(dst []byte, m *Message, meta *Meta) {
	byteOrder.PutUint32(dst[posQueueID:], uint32(meta.QueueID))
	byteOrder.PutUint32(dst[posFlag:], uint32(m.Flag))
	byteOrder.PutUint64(dst[posQueueOffset:], uint64(meta.QueueOffset))
	byteOrder.PutUint32(dst[posSysFlag:], m.SysFlag)
	byteOrder.PutUint64(dst[posBorn:], uint64(meta.BornMs))
	byteOrder.PutUint64(dst[posStore:], uint64(meta.StoreMs))
	byteOrder.PutUint32(dst[posReconsume:], uint32(m.ReconsumeTimes))
	byteOrder.PutUint64(dst[posPreparedTx:], uint64(m.PreparedTxOffset))
	byteOrder.PutUint32(dst[posTagsCode:], TagsCode(m.Tags))
	byteOrder.PutUint32(dst[posBodyLen:], uint32(len(m.Body)))
	p := posBody + copy(dst[posBody:], m.Body)
	topic := m.Topic
	if meta.Reroute != nil {
		topic = meta.Reroute.Topic
	}
	byteOrder.PutUint16(dst[p:], uint16(len(topic)))
	p += 2
	p += copy(dst[p:], topic)
	lenPos := p
	p += 2
	start := p
	p = encodeProps(dst, p, m, meta.Uniq)
	if r := meta.Reroute; r != nil {
		p = putProp(dst, p, PropRealTopic, r.RealTopic)
		p = putProp(dst, p, PropRealQueueID, r.RealQueue)
	}
	byteOrder.PutUint16(dst[lenPos:], uint16(p-start))
}

func putProp(dst []byte, p int, name, value string) int {
	p += copy(dst[p:], name)
	dst[p] = propNameSep
	p++
	p += copy(dst[p:], value)
	dst[p] = propValueSep
	return p + 1
}

func putPropInt(dst []byte, p int, name string, v int64) int {
	p += copy(dst[p:], name)
	dst[p] = propNameSep
	p++
	p += len(strconv.AppendInt(dst[p:p], v, 10))
	dst[p] = propValueSep
	return p + 1
}

func encodeProps(dst []byte, p int, m *Message, uniq []byte) int {
	if m.Tags != "" {
		p = putProp(dst, p, PropTags, m.Tags)
	}
	if len(m.Keys) > 0 {
		p += copy(dst[p:], PropKeys)
		dst[p] = propNameSep
		p++
		for i, k := range m.Keys {
			if i > 0 {
				dst[p] = ' '
				p++
			}
			p += copy(dst[p:], k)
		}
		dst[p] = propValueSep
		p++
	}
	if m.UniqKey != "" {
		p = putProp(dst, p, PropUniqKey, m.UniqKey)
	} else if len(uniq) > 0 {
		p += copy(dst[p:], PropUniqKey)
		dst[p] = propNameSep
		p++
		p += copy(dst[p:], uniq)
		dst[p] = propValueSep
		p++
	}
	if m.ShardingKey != "" {
		p = putProp(dst, p, PropShardingKey, m.ShardingKey)
	}
	if m.DedupID != "" {
		p = putProp(dst, p, PropDedupID, m.DedupID)
	}
	if m.DelayLevel > 0 {
		p = putPropInt(dst, p, PropDelay, int64(m.DelayLevel))
	}
	if !m.DeliverAt.IsZero() {
		p = putPropInt(dst, p, PropDeliverAt, m.DeliverAt.UnixMilli())
	}
	switch len(m.Properties) {
	case 0:
	case 1:
		for k, v := range m.Properties {
			p = putProp(dst, p, k, v)
		}
	default:
		names := make([]string, 0, len(m.Properties))
		for k := range m.Properties {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			p = putProp(dst, p, k, m.Properties[k])
		}
	}
	return p
}

// View reads a payload in place, without copying. A View is valid only as
// long as the bytes it wraps; the store hands them out inside a callback.
type View []byte

// CheckPayload validates the length fields of a payload: every length fits
// in the bytes present and they add up exactly.
func CheckPayload(b []byte) error {
	_, _, _, err := payloadLens(b)
	return err
}

// payloadLens reads and checks a payload's three length fields (see
// CheckPayload) and returns them: decoding uses what it checked, so that a
// record's lengths are read and checked once.
func payloadLens(b []byte) (bodyLen, topicLen, propsLen int, err error) {
	if len(b) < FixedSize {
		return 0, 0, 0, ErrTruncated
	}
	body := uint64(byteOrder.Uint32(b[posBodyLen:]))
	p := uint64(posBody) + body
	if p+2 > uint64(len(b)) {
		return 0, 0, 0, ErrTruncated
	}
	topic := uint64(byteOrder.Uint16(b[p:]))
	p += 2 + topic
	if p+2 > uint64(len(b)) {
		return 0, 0, 0, ErrTruncated
	}
	props := uint64(byteOrder.Uint16(b[p:]))
	p += 2 + props
	if p != uint64(len(b)) {
		return 0, 0, 0, fmt.Errorf("%w: payload lengths add up to %d, record holds %d", errs.ErrCorrupt, p, len(b))
	}
	return int(body), int(topic), int(props), nil
}

// QueueID returns the queue id.
func (v View) QueueID() int32 { return int32(byteOrder.Uint32(v[posQueueID:])) }

// QueueOffset returns the logical offset in the queue.
func (v View) QueueOffset() int64 { return int64(byteOrder.Uint64(v[posQueueOffset:])) }

// SysFlag returns the sysflag bits.
func (v View) SysFlag() uint32 { return byteOrder.Uint32(v[posSysFlag:]) }

// StoreMs returns the store timestamp in unix milliseconds.
func (v View) StoreMs() int64 { return int64(byteOrder.Uint64(v[posStore:])) }

// TagsCode returns the stored tags hash.
func (v View) TagsCode() uint32 { return byteOrder.Uint32(v[posTagsCode:]) }

// Body returns the body bytes in place.
func (v View) Body() []byte {
	n := byteOrder.Uint32(v[posBodyLen:])
	return v[posBody : posBody+int(n)]
}

func (v View) topicPos() int { return posBody + len(v.Body()) }

// Topic returns the topic bytes in place.
func (v View) Topic() []byte {
	p := v.topicPos()
	n := int(byteOrder.Uint16(v[p:]))
	return v[p+2 : p+2+n]
}

// Props returns the encoded properties in place.
func (v View) Props() []byte {
	p := v.topicPos()
	p += 2 + int(byteOrder.Uint16(v[p:]))
	n := int(byteOrder.Uint16(v[p:]))
	return v[p+2 : p+2+n]
}

// nextProp splits the first name/value pair off props, in place; ok is
// false when props holds no complete pair.
func nextProp(props []byte) (name, value, rest []byte, ok bool) {
	i := bytes.IndexByte(props, propNameSep)
	if i < 0 {
		return nil, nil, nil, false
	}
	j := bytes.IndexByte(props[i+1:], propValueSep)
	if j < 0 {
		return nil, nil, nil, false
	}
	return props[:i], props[i+1 : i+1+j], props[i+2+j:], true
}

// Prop returns the value of the property name in place, or nil.
func (v View) Prop(name string) []byte {
	for props := v.Props(); len(props) > 0; {
		n, val, rest, ok := nextProp(props)
		if !ok {
			return nil
		}
		if string(n) == name {
			return val
		}
		props = rest
	}
	return nil
}

// KeyProps returns the UNIQ_KEY and KEYS properties (nil if absent), in one
// pass over the properties: what the dispatcher indexes of every record.
func (v View) KeyProps() (uniq, keys []byte) {
	for props := v.Props(); len(props) > 0; {
		n, val, rest, ok := nextProp(props)
		if !ok {
			return
		}
		switch name := string(n); { // the first of each, as Prop
		case uniq == nil && name == PropUniqKey:
			uniq = val
		case keys == nil && name == PropKeys:
			keys = val
		}
		props = rest
	}
	return
}

// Decode copies a checked payload into ext (strings and body are copies).
func Decode(b []byte, ext *MessageExt) error { return decode(b, -1, ext) }

// DecodeAt is Decode for the record stored at CommitLog offset off, and
// also sets ext.MsgID.
func DecodeAt(b []byte, off int64, ext *MessageExt) error { return decode(b, off, ext) }

// decode copies the variable part of the payload (body, topic, properties)
// and the message ID into one allocation; Body, Topic, MsgID and the
// property strings point into it. Body's capacity ends at its length, so
// appending to it copies and writing into it cannot change the strings.
// decodeInto checks the payload before it allocates anything.
func decode(b []byte, off int64, ext *MessageExt) error {
	if len(b) < FixedSize {
		return ErrTruncated
	}
	return decodeInto(b, off, ext, make([]byte, decodedSize(len(b), off)))
}

// decodedSize is the length of the copy decode makes of a payload of n
// (at least FixedSize) bytes.
func decodedSize(n int, off int64) int {
	if off >= 0 {
		return n - posBody + idSize
	}
	return n - posBody
}

// idSize is the length of a message ID.
const idSize = 16

// decodeInto is decode of payload b into tail, which is decodedSize bytes
// and not shared with anything else. It is the payload's check
// (CheckPayload) too: it reads the length fields once, checks them, and
// cuts the copy with the lengths it checked, so a caller need not check b
// first; on an error ext and tail are left half written.
func decodeInto(b []byte, off int64, ext *MessageExt, tail []byte) error {
	bodyLen, tn, pn, err := payloadLens(b)
	if err != nil {
		return err
	}
	ext.QueueID = int(int32(byteOrder.Uint32(b[posQueueID:])))
	ext.QueueOffset = int64(byteOrder.Uint64(b[posQueueOffset:]))
	ext.StoreTimestamp = time.UnixMilli(int64(byteOrder.Uint64(b[posStore:])))
	m := &ext.Message
	m.Flag = int32(byteOrder.Uint32(b[posFlag:]))
	m.SysFlag = byteOrder.Uint32(b[posSysFlag:])
	m.BornTimestamp = time.UnixMilli(int64(byteOrder.Uint64(b[posBorn:])))
	m.ReconsumeTimes = int32(byteOrder.Uint32(b[posReconsume:]))
	m.PreparedTxOffset = int64(byteOrder.Uint64(b[posPreparedTx:]))
	n := copy(tail, b[posBody:])
	if off >= 0 {
		putID(tail[n:], off)
		ext.MsgID = shared(tail[n:])
	}
	m.Body = tail[:bodyLen:bodyLen]
	p := bodyLen + 2
	m.Topic = shared(tail[p : p+tn])
	p += tn + 2
	return decodeProps(tail[p:p+pn], m)
}

// shared is a string over b, which must never change afterwards.
func shared(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func decodeProps(props []byte, m *Message) error {
	for len(props) > 0 {
		// A name is short: a plain loop finds its end sooner than an
		// IndexByte call, and one pass also sees a value separator
		// before it (malformed).
		i := 0
		for i < len(props) && props[i] != propNameSep && props[i] != propValueSep {
			i++
		}
		if i == len(props) || props[i] != propNameSep {
			return fmt.Errorf("%w: malformed properties", errs.ErrCorrupt)
		}
		j := bytes.IndexByte(props[i+1:], propValueSep)
		if j < 0 {
			return fmt.Errorf("%w: malformed properties", errs.ErrCorrupt)
		}
		j += i + 1
		name, value := shared(props[:i]), shared(props[i+1:j]) // props is decode's private copy
		props = props[j+1:]
		switch name {
		case PropTags:
			m.Tags = value
		case PropKeys:
			m.Keys = strings.Split(value, " ")
		case PropUniqKey:
			m.UniqKey = value
		case PropShardingKey:
			m.ShardingKey = value
		case PropDedupID:
			m.DedupID = value
		case PropDelay:
			n, err := strconv.Atoi(value)
			if err != nil {
				return fmt.Errorf("%w: bad delay level %q", errs.ErrCorrupt, value)
			}
			m.DelayLevel = n
		case PropDeliverAt:
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return fmt.Errorf("%w: bad deliver time %q", errs.ErrCorrupt, value)
			}
			m.DeliverAt = time.UnixMilli(n)
		default:
			if m.Properties == nil {
				m.Properties = map[string]string{}
			}
			m.Properties[name] = value
		}
	}
	return nil
}

// ID returns the message ID for a CommitLog offset: 16 upper-case hex
// digits. Lookup by ID is a direct read at that offset.
func ID(commitLogOffset int64) string {
	var b [16]byte
	putID(b[:], commitLogOffset)
	return string(b[:])
}

func putID(dst []byte, commitLogOffset int64) {
	_ = dst[15]
	u := uint64(commitLogOffset)
	for i := 14; i >= 0; i -= 2 { // a byte, two digits, at a time
		h := hexPairs[u&0xFF]
		dst[i], dst[i+1] = h[0], h[1]
		u >>= 8
	}
}

// hexPairs holds the two upper-case hex digits of every byte value.
var hexPairs = func() (t [256][2]byte) {
	const hex = "0123456789ABCDEF"
	for i := range t {
		t[i] = [2]byte{hex[i>>4], hex[i&0xF]}
	}
	return t
}()

// ErrBadID reports a string that is not a message ID.
var ErrBadID = fmt.Errorf("%w: malformed message ID", errs.ErrInvalidArgument)

// ParseID returns the CommitLog offset a message ID encodes: 16
// upper-case hex digits of a non-negative int64. The error says which of
// these id is not.
func ParseID(id string) (int64, error) {
	if len(id) != 16 {
		return 0, fmt.Errorf("%w: %q has %d characters, an ID has 16 hex digits", ErrBadID, id, len(id))
	}
	u, err := strconv.ParseUint(id, 16, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: %q is not hexadecimal", ErrBadID, id)
	case strings.ToUpper(id) != id:
		return 0, fmt.Errorf("%w: %q has lower-case digits (IDs are upper-case: %s)", ErrBadID, id, strings.ToUpper(id))
	case int64(u) < 0:
		return 0, fmt.Errorf("%w: %q is above 7FFFFFFFFFFFFFFF, the largest CommitLog offset", ErrBadID, id)
	}
	return int64(u), nil
}
