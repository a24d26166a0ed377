package delay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoffDoublesToTheCapAndResets(t *testing.T) {
	var b backoff
	var got []time.Duration
	for range 10 {
		got = append(got, b.fail())
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms,
		10 * time.Second, 10 * time.Second, 10 * time.Second}, got)
	b.reset()
	require.Equal(t, 100*ms, b.fail())
}
