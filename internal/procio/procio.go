// Package procio reads what this process's /proc and /sys files tell of its
// files and of the kernel, for the tests and benchmarks that check how a
// file is paged in and written back. It reports "cannot tell" where those
// files do not exist (every system but Linux).
package procio

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

// SmapsField is the value of field (such as "Rss:" or "VmFlags:") of this
// process's first mapping of path in /proc/self/smaps; false where there
// is none, or no smaps.
func SmapsField(path, field string) (string, bool) {
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return "", false
	}
	lines := strings.Split(string(smaps), "\n")
	for i, l := range lines {
		if !strings.HasSuffix(l, " "+path) {
			continue
		}
		for _, l := range lines[i+1:] {
			if v, ok := strings.CutPrefix(l, field); ok {
				return strings.TrimSpace(v), true
			}
		}
	}
	return "", false
}

// HugePagesOffered says whether the kernel offers transparent huge pages
// at all (HugePages is a hint it may ignore).
func HugePagesOffered() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && !strings.Contains(string(b), "[never]")
}
