package message

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRerouteEncodesRealTopic: a rerouted message is stored under the
// route's topic with its real topic and queue as properties, and the size
// computed beforehand is exact.
func TestRerouteEncodesRealTopic(t *testing.T) {
	m := &Message{Topic: "orders", Tags: "t", Keys: []string{"k"}, Properties: map[string]string{"a": "1"},
		Body: []byte("body"), DelayLevel: 3}
	r := &Reroute{Topic: "SCHEDULE_TOPIC_XXXX", RealTopic: "orders", RealQueue: "7"}
	uniq := []byte("0123456789ABCDEF0123456789ABCDEF")
	n := PayloadSizeRouted(m, len(uniq), r)
	b := make([]byte, n+8)
	Encode(b, m, &Meta{QueueID: 2, QueueOffset: 5, Uniq: uniq, Reroute: r})
	require.NoError(t, CheckPayload(b[:n]))
	var ext MessageExt
	require.NoError(t, Decode(b[:n], &ext))
	require.Equal(t, "SCHEDULE_TOPIC_XXXX", ext.Topic)
	require.Equal(t, "orders", ext.Properties[PropRealTopic])
	require.Equal(t, "7", ext.Properties[PropRealQueueID])
	require.Equal(t, "1", ext.Properties["a"])
	require.Equal(t, 3, ext.DelayLevel)
	require.Equal(t, "body", string(ext.Body))
	require.Equal(t, []string{"k"}, ext.Keys)
}
