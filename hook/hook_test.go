package hook

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/message"
)

type key string

// TestChain: a's hook runs before b's, Before contexts pass on, a field
// set on one side only is that side's, and neither side leaves it nil.
func TestChain(t *testing.T) {
	var order []string
	a := Hooks{
		BeforeSend: func(ctx context.Context, m *message.Message) context.Context {
			order = append(order, "a")
			return context.WithValue(ctx, key("a"), 1)
		},
		Stored: func(StoreEvent) { order = append(order, "a-stored") },
	}
	b := Hooks{
		BeforeSend: func(ctx context.Context, m *message.Message) context.Context {
			order = append(order, "b")
			require.Equal(t, 1, ctx.Value(key("a")), "b sees a's context")
			return nil // nil: unchanged
		},
	}
	c := Chain(a, b)
	ctx := c.BeforeSendCtx(context.Background(), &message.Message{})
	require.Equal(t, 1, ctx.Value(key("a")))
	c.Stored(StoreEvent{})
	require.Equal(t, []string{"a", "b", "a-stored"}, order)
	require.Nil(t, c.AfterSend)
	require.Nil(t, c.TxDecision)
	empty := Chain(Hooks{}, Hooks{})
	require.False(t, empty.Sends())
	require.False(t, empty.Consumes())
}

// TestSafe: a panicking hook is reported with its name and does not
// propagate; a panicking Before hook leaves the context as it was; unset
// hooks stay nil.
func TestSafe(t *testing.T) {
	var got []string
	h := Safe(Hooks{
		BeforeConsume: func(context.Context, ConsumeEvent) context.Context { panic("x") },
		Retry:         func(RetryEvent) { panic("y") },
	}, func(name string, v any) { got = append(got, name+":"+v.(string)) })
	ctx := context.WithValue(context.Background(), key("k"), 2)
	require.Equal(t, ctx, h.BeforeConsumeCtx(ctx, ConsumeEvent{}))
	h.Retry(RetryEvent{})
	require.Equal(t, []string{"BeforeConsume:x", "Retry:y"}, got)
	require.Nil(t, h.BeforeSend)
	require.Nil(t, h.AfterConsume)
	require.False(t, h.Sends())
	require.True(t, h.Consumes())
}
