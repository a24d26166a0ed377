package message

// Fuzz targets for the payload codec (reliability plan S37). Their seed
// corpora run as unit tests in every `go test`; fuzz them with
//
//	go test -run '^$' -fuzz '^FuzzDecodeRecord$' -fuzztime 5m ./message

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
)

var fuzzNow = time.UnixMilli(1_700_000_000_000)

// seedMessages are real messages covering every optional field.
func seedMessages() []*Message {
	return []*Message{
		{Topic: "t", Body: []byte("x")},
		{Topic: "orders", Tags: "created", Keys: []string{"k1", "k2"}, Body: []byte("hello world"),
			Properties: map[string]string{"a": "1", "b": "", "long": strings.Repeat("v", 300)}, Flag: -7},
		{Topic: "%RETRY%group", Body: bytes.Repeat([]byte{0, 1, 2}, 100), UniqKey: "MYUNIQ", ShardingKey: "shard",
			DelayLevel: 3, ReconsumeTimes: 2, SysFlag: SysTxPrepared, PreparedTxOffset: 1 << 40},
		{Topic: "t", Body: []byte{0}, DeliverAt: fuzzNow.Add(time.Hour), Properties: map[string]string{"only": "one"}},
	}
}

func encodeForTest(m *Message, meta *Meta) []byte {
	b := make([]byte, PayloadSize(m, len(meta.Uniq)))
	Encode(b, m, meta)
	return b
}

// reencode encodes a decoded message again, with the stored fields that
// Encode takes from Meta.
func reencode(ext *MessageExt) []byte {
	meta := &Meta{QueueID: int32(ext.QueueID), QueueOffset: ext.QueueOffset, StoreMs: ext.StoreTimestamp.UnixMilli(),
		BornMs: ext.BornTimestamp.UnixMilli()}
	return encodeForTest(&ext.Message, meta)
}

// FuzzDecodeRecord decodes arbitrary bytes: CheckPayload, the View
// accessors and Decode never panic; a payload that decodes re-encodes to a
// canonical form that is a fixed point, and a canonical payload (anything
// Encode wrote) re-encodes to exactly its own bytes.
func FuzzDecodeRecord(f *testing.F) {
	for i, m := range seedMessages() {
		meta := &Meta{QueueID: int32(i), QueueOffset: int64(i * 1000), StoreMs: 1_700_000_000_123, BornMs: 1_600_000_000_000,
			Uniq: []byte("0123456789ABCDEF0123456789ABCDEF")}
		f.Add(encodeForTest(m, meta))
	}
	f.Add([]byte{})
	f.Add(make([]byte, FixedSize))
	f.Add(bytes.Repeat([]byte{0xFF}, FixedSize+10))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		err := CheckPayload(b)
		var ext MessageExt
		derr := Decode(b, &ext)
		if !bytes.Equal(in, b) {
			t.Fatal("decoding changed its input")
		}
		if err != nil {
			if !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("CheckPayload error %v does not match ErrCorrupt", err)
			}
			if derr == nil {
				t.Fatal("Decode accepted what CheckPayload rejects")
			}
			return
		}
		v := View(b)
		_ = v.QueueID() + int32(v.QueueOffset()) + int32(v.SysFlag()) + int32(v.StoreMs()) + int32(v.TagsCode())
		if len(v.Body())+len(v.Topic())+len(v.Props())+FixedSize != len(b) {
			t.Fatalf("view fields do not add up to %d bytes", len(b))
		}
		for _, name := range []string{PropTags, PropKeys, PropUniqKey, "a", ""} {
			_ = v.Prop(name)
		}
		if uniq, keys := v.KeyProps(); !bytes.Equal(uniq, v.Prop(PropUniqKey)) || !bytes.Equal(keys, v.Prop(PropKeys)) ||
			(uniq == nil) != (v.Prop(PropUniqKey) == nil) || (keys == nil) != (v.Prop(PropKeys) == nil) {
			t.Fatalf("KeyProps %q %q, Prop %q %q", uniq, keys, v.Prop(PropUniqKey), v.Prop(PropKeys))
		}
		if derr != nil {
			if !errors.Is(derr, errs.ErrCorrupt) {
				t.Fatalf("Decode error %v does not match ErrCorrupt", derr)
			}
			return
		}
		if !bytes.Equal(ext.Body, v.Body()) || ext.Topic != string(v.Topic()) || ext.QueueID != int(v.QueueID()) || ext.QueueOffset != v.QueueOffset() {
			t.Fatal("Decode disagrees with View")
		}
		canon := reencode(&ext)
		var ext2 MessageExt
		if err := Decode(canon, &ext2); err != nil {
			t.Fatalf("re-encoded payload does not decode: %v", err)
		}
		if again := reencode(&ext2); !bytes.Equal(canon, again) {
			t.Fatalf("canonical form is not a fixed point:\n%x\n%x", canon, again)
		}
		// The re-encoding keeps every value Encode can represent; the one
		// normalisation is a delay level <= 0, which means none.
		want := ext
		if want.DelayLevel < 0 {
			want.DelayLevel = 0
		}
		if !sameMessage(&want, &ext2) {
			t.Fatalf("re-encoding changed the message:\nfirst  %+v\nsecond %+v", want, ext2)
		}
	})
}

// sameMessage compares decoded messages value by value.
func sameMessage(a, b *MessageExt) bool {
	return a.QueueID == b.QueueID && a.QueueOffset == b.QueueOffset && a.StoreTimestamp.Equal(b.StoreTimestamp) &&
		a.Topic == b.Topic && bytes.Equal(a.Body, b.Body) && a.Tags == b.Tags && slicesEqual(a.Keys, b.Keys) &&
		maps.Equal(a.Properties, b.Properties) && a.Flag == b.Flag && a.ShardingKey == b.ShardingKey &&
		a.DelayLevel == b.DelayLevel && a.DeliverAt.Equal(b.DeliverAt) && a.UniqKey == b.UniqKey &&
		a.ReconsumeTimes == b.ReconsumeTimes && a.SysFlag == b.SysFlag && a.PreparedTxOffset == b.PreparedTxOffset &&
		a.BornTimestamp.Equal(b.BornTimestamp)
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSeedPayloadsReencodeExactly: a payload Encode wrote decodes and
// re-encodes to exactly the same bytes.
func TestSeedPayloadsReencodeExactly(t *testing.T) {
	for i, m := range seedMessages() {
		for _, uniq := range [][]byte{nil, []byte("0123456789ABCDEF0123456789ABCDEF")} {
			b := encodeForTest(m, &Meta{QueueID: int32(i), QueueOffset: 7, StoreMs: 1_700_000_000_001, BornMs: 1_600_000_000_002, Uniq: uniq})
			var ext MessageExt
			if err := Decode(b, &ext); err != nil {
				t.Fatalf("seed %d: %v", i, err)
			}
			if again := reencode(&ext); !bytes.Equal(b, again) {
				t.Fatalf("seed %d: re-encoding differs:\n%x\n%x", i, b, again)
			}
		}
	}
}

// FuzzRecordRoundTrip builds a message from fuzzed fields: if Validate
// accepts it, it encodes into exactly PayloadSize bytes and decodes to the
// same values; if not, the error is a typed invalid-argument (or
// too-large) error.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add("orders", int32(3), "a=1;b=2", "tag", "k1 k2", []byte("body"), uint8(0), int64(0))
	f.Add("%RETRY%g", int32(0), "", "", "", []byte{0}, uint8(2), int64(0))
	f.Add("t", int32(-1), "x=\x01", "a||b", "", []byte("x"), uint8(0), int64(1))
	f.Add("bad topic", int32(1), "=", "", "a  b", []byte{}, uint8(70), int64(-5))
	f.Add(strings.Repeat("t", 130), int32(1<<20), "TAGS=x", "t", "k", []byte("b"), uint8(1), int64(1_700_000_000_000))
	f.Fuzz(func(t *testing.T, topic string, queueID int32, props, tags, keys string, body []byte, delay uint8, deliverMs int64) {
		m := &Message{Topic: topic, Tags: tags, Body: body, DelayLevel: int(delay)}
		if keys != "" {
			m.Keys = strings.Split(keys, " ")
		}
		if props != "" {
			m.Properties = map[string]string{}
			for kv := range strings.SplitSeq(props, ";") {
				k, v, _ := strings.Cut(kv, "=")
				m.Properties[k] = v
			}
		}
		if deliverMs != 0 {
			m.DeliverAt = time.UnixMilli(deliverMs)
		}
		maxTopic := MaxTopicLen
		if strings.HasPrefix(topic, "%") {
			maxTopic = MaxSysTopicLen
		}
		uniq := []byte("00000000000000000000000000000001")
		if err := Validate(m, 1<<16, maxTopic, len(uniq), fuzzNow); err != nil {
			if !errors.Is(err, errs.ErrInvalidArgument) && !errors.Is(err, errs.ErrMessageTooLarge) {
				t.Fatalf("Validate error %v is not typed", err)
			}
			return
		}
		meta := &Meta{QueueID: queueID, QueueOffset: 42, StoreMs: 1_700_000_000_500, BornMs: 1_700_000_000_400, Uniq: uniq}
		b := encodeForTest(m, meta)
		if err := CheckPayload(b); err != nil {
			t.Fatalf("Encode wrote a payload CheckPayload rejects: %v", err)
		}
		var ext MessageExt
		if err := Decode(b, &ext); err != nil {
			t.Fatalf("Decode of a valid message: %v", err)
		}
		got := &ext.Message
		wantKeys := m.Keys
		if got.Topic != m.Topic || !bytes.Equal(got.Body, m.Body) || got.Tags != m.Tags || !slicesEqual(got.Keys, wantKeys) ||
			got.UniqKey != string(uniq) || got.DelayLevel != m.DelayLevel || !got.DeliverAt.Equal(m.DeliverAt) ||
			ext.QueueID != int(queueID) || ext.QueueOffset != 42 || ext.StoreTimestamp.UnixMilli() != meta.StoreMs ||
			got.BornTimestamp.UnixMilli() != meta.BornMs {
			t.Fatalf("round trip changed the message:\nsent %+v\ngot  %+v", m, got)
		}
		wantProps := m.Properties
		if len(wantProps) == 0 {
			wantProps = nil
		}
		if !maps.Equal(got.Properties, wantProps) {
			t.Fatalf("properties changed: sent %q got %q", m.Properties, got.Properties)
		}
		if View(b).TagsCode() != TagsCode(m.Tags) {
			t.Fatal("stored tags hash differs")
		}
		if again := reencode(&ext); !bytes.Equal(b, again) {
			t.Fatalf("decode and re-encode changed the bytes:\n%x\n%x", b, again)
		}
	})
}
