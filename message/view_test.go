package message

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// KeyProps finds what Prop finds for UNIQ_KEY and KEYS, wherever they sit
// among the other properties, and nil for an absent one.
func TestKeyProps(t *testing.T) {
	uniq := []byte("0123456789ABCDEF0123456789ABCDEF")
	for _, tc := range []struct {
		name       string
		m          Message
		uniq, keys string // "" = absent
	}{
		{"bare", Message{Topic: "t", Body: []byte("b")}, string(uniq), ""},
		{"keys and others", Message{Topic: "t", Tags: "x", Keys: []string{"k1", "k2"}, ShardingKey: "s",
			Properties: map[string]string{"a": "1", "b": "2"}, Body: []byte("b")}, string(uniq), "k1 k2"},
		{"own unique key", Message{Topic: "t", UniqKey: "mine", Keys: []string{"k"}, Body: []byte("b")}, "mine", "k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]byte, PayloadSize(&tc.m, len(uniq)))
			Encode(b, &tc.m, &Meta{Uniq: uniq})
			require.NoError(t, CheckPayload(b))
			v := View(b)
			u, k := v.KeyProps()
			require.Equal(t, tc.uniq, string(u))
			require.Equal(t, tc.keys, string(k))
			require.Equal(t, v.Prop(PropUniqKey), u)
			require.Equal(t, v.Prop(PropKeys), k)
			require.Equal(t, tc.keys == "", k == nil)
		})
	}
}
