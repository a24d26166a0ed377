package broker

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/message"
)

// The message layouts of the protocol: properties as name\x01value\x02,
// the batch body a producer sends, and the stored-message encoding of pull
// and query responses.

var errBadMessage = errors.New("mqlite/broker: malformed message")

const (
	nameValueSep = '\x01'
	propertySep  = '\x02'
	msgMagic     = 0xAABBCCDD
	maxInflate   = 64 << 20
)

// Properties the client sets that the broker maps to Message fields or
// drops (the transaction properties are the txn package's own).
const (
	propTranMsg      = "TRAN_MSG"
	propPGroup       = "PGROUP"
	propWait         = "WAIT"
	propMaxReconsume = "MAX_RECONSUME_TIMES"
)

func parseProperties(s string) map[string]string {
	props := map[string]string{}
	for item := range strings.SplitSeq(s, string(propertySep)) {
		k, v, ok := strings.Cut(item, string(nameValueSep))
		if ok && k != "" {
			props[k] = v
		}
	}
	return props
}

func appendProperties(dst []byte, props map[string]string) []byte {
	for _, k := range slices.Sorted(maps.Keys(props)) {
		v := props[k]
		dst = append(dst, k...)
		dst = append(dst, nameValueSep)
		dst = append(dst, v...)
		dst = append(dst, propertySep)
	}
	return dst
}

// toMessage builds the Store's message from what a client sent.
func toMessage(topic string, body []byte, props map[string]string, flag int32, sysFlag int, born int64) (*mqlite.Message, error) {
	if sysFlag&sysCompressed != 0 {
		plain, err := inflate(body)
		if err != nil {
			return nil, err
		}
		body = plain
	}
	m := &mqlite.Message{Topic: topic, Body: body, Flag: flag}
	if born > 0 {
		m.BornTimestamp = time.UnixMilli(born)
	}
	m.Tags = props[message.PropTags]
	if keys := props[message.PropKeys]; keys != "" {
		m.Keys = strings.Fields(keys)
	}
	m.UniqKey = props[message.PropUniqKey]
	if v := props[message.PropDelay]; v != "" {
		lvl, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%w: DELAY %q", mqlite.ErrInvalidDelay, v)
		}
		m.DelayLevel = lvl
	}
	if v := props[message.PropDeliverAt]; v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: TIMER_DELIVER_MS %q", mqlite.ErrInvalidDelay, v)
		}
		m.DeliverAt = time.UnixMilli(ms)
	}
	for _, k := range []string{message.PropTags, message.PropKeys, message.PropUniqKey, message.PropDelay,
		message.PropDeliverAt, message.PropRealTopic, message.PropRealQueueID, message.PropShardingKey, propWait} {
		delete(props, k)
	}
	if len(props) > 0 {
		m.Properties = props
	}
	return m, nil
}

func inflate(body []byte) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: compressed body: %v", errBadMessage, err)
	}
	defer zr.Close()
	plain, err := io.ReadAll(io.LimitReader(zr, maxInflate+1))
	if err != nil {
		return nil, fmt.Errorf("%w: compressed body: %v", errBadMessage, err)
	}
	if len(plain) > maxInflate {
		return nil, fmt.Errorf("%w: compressed body inflates past %d bytes", errBadMessage, maxInflate)
	}
	return plain, nil
}

// batchItem is one message of a batch body.
type batchItem struct {
	body  []byte
	props map[string]string
	flag  int32
}

// decodeBatch splits a batch body: per message total size, magic, body
// CRC, flag, body length, body, properties length (2 bytes), properties.
func decodeBatch(data []byte) ([]batchItem, error) {
	var items []batchItem
	for len(data) > 0 {
		if len(data) < 20 {
			return nil, fmt.Errorf("%w: batch entry of %d bytes", errBadMessage, len(data))
		}
		total := int(binary.BigEndian.Uint32(data))
		if total < 22 || total > len(data) {
			return nil, fmt.Errorf("%w: batch entry size %d, %d bytes left", errBadMessage, total, len(data))
		}
		e := data[:total]
		flag := int32(binary.BigEndian.Uint32(e[12:]))
		blen := int(binary.BigEndian.Uint32(e[16:]))
		if blen < 0 || 20+blen+2 > total {
			return nil, fmt.Errorf("%w: batch body length %d in an entry of %d", errBadMessage, blen, total)
		}
		body := e[20 : 20+blen]
		plen := int(binary.BigEndian.Uint16(e[20+blen:]))
		if 22+blen+plen > total {
			return nil, fmt.Errorf("%w: batch properties length %d in an entry of %d", errBadMessage, plen, total)
		}
		props := parseProperties(string(e[22+blen : 22+blen+plen]))
		items = append(items, batchItem{body: body, props: props, flag: flag})
		data = data[total:]
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: empty batch", errBadMessage)
	}
	return items, nil
}

// hostBytes returns the IP (4 or 16 bytes) and port of addr.
func hostBytes(addr string) ([]byte, int32, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return net.IPv4(127, 0, 0, 1).To4(), 0, false
	}
	p, _ := strconv.Atoi(port)
	ip := net.ParseIP(host)
	if ip == nil {
		if ips, err := net.LookupIP(host); err == nil && len(ips) > 0 {
			ip = ips[0]
		} else {
			ip = net.IPv4(127, 0, 0, 1)
		}
	}
	if v4 := ip.To4(); v4 != nil {
		return v4, int32(p), false
	}
	return ip.To16(), int32(p), true
}

// offsetMsgID is RocketMQ's message ID: store host, port and CommitLog
// offset in upper-case hex.
func (b *Broker) offsetMsgID(off int64) string {
	ip, port := b.host.ip, b.host.port
	buf := make([]byte, 0, len(ip)+12)
	buf = append(buf, ip...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(port))
	buf = binary.BigEndian.AppendUint64(buf, uint64(off))
	return strings.ToUpper(hex.EncodeToString(buf))
}

// clientProperties returns the properties a client reads for m.
func clientProperties(m *mqlite.MessageExt) map[string]string {
	props := make(map[string]string, len(m.Properties)+4)
	for k, v := range m.Properties {
		props[k] = v
	}
	if m.Tags != "" {
		props[message.PropTags] = m.Tags
	}
	if len(m.Keys) > 0 {
		props[message.PropKeys] = strings.Join(m.Keys, " ")
	}
	if m.UniqKey != "" {
		props[message.PropUniqKey] = m.UniqKey
	}
	if m.ShardingKey != "" {
		props[message.PropShardingKey] = m.ShardingKey
	}
	return props
}

// appendMessage appends m in the stored-message layout the client
// decodes (primitive.DecodeMessage).
func (b *Broker) appendMessage(dst []byte, m *mqlite.MessageExt, props map[string]string) []byte {
	ip, port, v6 := b.host.ip, b.host.port, b.host.v6
	sys := int32(m.SysFlag & sysTxTypeMask)
	if v6 {
		sys |= sysBornHostV6 | sysStoreHostV6
	}
	topic := m.Topic
	if len(topic) > 255 {
		topic = topic[:255]
	}
	propBytes := appendProperties(nil, props)
	if len(propBytes) > 0xFFFF {
		propBytes = propBytes[:0]
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0) // total size, set below
	dst = binary.BigEndian.AppendUint32(dst, msgMagic)
	dst = binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(m.Body))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.QueueID))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.Flag))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.QueueOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.CommitLogOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(sys))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.BornTimestamp.UnixMilli()))
	dst = append(dst, ip...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(port))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.StoreTimestamp.UnixMilli()))
	dst = append(dst, ip...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(port))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.ReconsumeTimes))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.PreparedTxOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Body)))
	dst = append(dst, m.Body...)
	dst = append(dst, byte(len(topic)))
	dst = append(dst, topic...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(propBytes)))
	dst = append(dst, propBytes...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst
}
