package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFakeTimersAndTickers(t *testing.T) {
	f := NewFake(time.Unix(1000, 0))
	tm := f.NewTimer(time.Second)
	tk := f.NewTicker(300 * time.Millisecond)
	defer tk.Stop()
	f.Advance(500 * time.Millisecond)
	select {
	case <-tm.C():
		t.Fatal("timer fired early")
	default:
	}
	require.Equal(t, time.Unix(1000, 300e6), <-tk.C())
	f.Advance(500 * time.Millisecond)
	require.Equal(t, time.Unix(1001, 0), <-tm.C())
	require.Equal(t, time.Unix(1000, 600e6), <-tk.C(), "first missed tick; the rest are dropped")
	require.False(t, tm.Stop(), "fired timers are gone")
	require.Equal(t, 1, f.Waiters())
}
