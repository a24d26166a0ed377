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

// NewTimerAt fires when the fake time reaches the instant, and at once for
// an instant already reached: arming it is not relative to when it is
// armed (AtTimer).
func TestFakeNewTimerAt(t *testing.T) {
	start := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	var _ AtTimer = f
	tm := f.NewTimerAt(start.Add(time.Second))
	f.Set(start.Add(time.Second - time.Millisecond))
	select {
	case <-tm.C():
		t.Fatal("fired before its instant")
	default:
	}
	f.Set(start.Add(time.Second))
	select {
	case at := <-tm.C():
		if !at.Equal(start.Add(time.Second)) {
			t.Fatalf("fired with %v, want its instant", at)
		}
	default:
		t.Fatal("did not fire at its instant")
	}
	select {
	case <-f.NewTimerAt(start).C():
	default:
		t.Fatal("a timer for an instant already passed did not fire at once")
	}
}
