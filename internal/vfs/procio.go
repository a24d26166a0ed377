package vfs

import (
	"os"
	"strconv"
	"strings"
)

// WrittenBytes is what this process has caused to be written to storage
// so far (write_bytes in /proc/self/io), for the tests and benchmarks that
// measure how much a sync writes back; false where the system cannot tell.
func WrittenBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
