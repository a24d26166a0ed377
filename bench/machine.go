package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Limit is one measured machine limit.
type Limit struct {
	Name      string
	MBPerSec  float64       `json:",omitempty"` // bandwidth probes
	OpsPerSec float64       `json:",omitempty"` // per-operation probes: 1 / mean
	P50, P99  time.Duration `json:",omitempty"`
	Note      string        `json:",omitempty"`
}

const pageSize = 4096

// runLimits measures what the hardware allows, in the run's own
// conditions: copies into a mapped file, sequential write bandwidth,
// fsync latency and what handing a cache line between two cores costs.
func runLimits(j Job) (r Result, err error) {
	probes := []func(Job) (Limit, error){probeMapTouch, probeMapCopy(4096), probeMapCopy(128),
		probeSeqWrite, probeFsync(false), probeFsync(true), probeGroup(128), probeGroup(4096), probeCoreHandoff}
	for _, p := range probes {
		l, err := p(j)
		if err != nil {
			return r, fmt.Errorf("%s: %w", l.Name, err)
		}
		r.Limits = append(r.Limits, l)
	}
	return r, nil
}

// probeMapTouch times the first write to each page of a fresh mapping of
// a fallocated file: what an append pays when nothing pre-touched it.
func probeMapTouch(j Job) (Limit, error) {
	l := Limit{Name: "first touch of a fresh mapped file (1 byte per 4 KiB page)"}
	b, unmap, err := mapFile(filepath.Join(j.Dir, "touch"), j.ProbeBytes)
	if err != nil {
		return l, err
	}
	start := time.Now()
	for i := 0; i < len(b); i += pageSize {
		b[i] = 1
	}
	l.MBPerSec = float64(len(b)) / time.Since(start).Seconds() / 1e6
	l.Note = fmt.Sprintf("%d MiB file", j.ProbeBytes>>20)
	return l, unmap()
}

// probeMapCopy times copies of size bytes into a mapped file whose pages
// are resident (touched once first): the ceiling of an mmap append.
func probeMapCopy(size int) func(Job) (Limit, error) {
	return func(j Job) (Limit, error) {
		l := Limit{Name: fmt.Sprintf("memcpy %s records into a resident mapped file", sizeName(size))}
		b, unmap, err := mapFile(filepath.Join(j.Dir, "copy"), j.ProbeBytes)
		if err != nil {
			return l, err
		}
		for i := 0; i < len(b); i += pageSize {
			b[i] = 1
		}
		src := newBodyPool(size)
		var copied int64
		start := time.Now()
		for pass := 0; copied < 4*j.ProbeBytes; pass++ {
			for off := 0; off+size <= len(b); off += size {
				copy(b[off:off+size], src.body(off/size))
			}
			copied += int64(len(b) / size * size)
		}
		secs := time.Since(start).Seconds()
		l.MBPerSec = float64(copied) / secs / 1e6
		l.OpsPerSec = float64(copied/int64(size)) / secs
		l.Note = "ops = records per second"
		return l, unmap()
	}
}

// probeSeqWrite writes j.WriteBytes in 1 MiB write() calls to a new file
// and fdatasyncs once at the end; the time includes the sync.
func probeSeqWrite(j Job) (Limit, error) {
	l := Limit{Name: "sequential write() of 1 MiB blocks + one fdatasync at the end"}
	f, err := os.Create(filepath.Join(j.Dir, "seq"))
	if err != nil {
		return l, err
	}
	defer f.Close()
	buf := newBodyPool(1 << 20).body(0)
	start := time.Now()
	for n := int64(0); n < j.WriteBytes; n += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			return l, err
		}
	}
	if err := fdatasync(f); err != nil {
		return l, err
	}
	l.MBPerSec = float64(j.WriteBytes) / time.Since(start).Seconds() / 1e6
	l.Note = fmt.Sprintf("%d MiB", j.WriteBytes>>20)
	return l, f.Close()
}

// probeFsync times a 4 KiB pwrite + fdatasync, j.FsyncOps times: appended
// to a growing file, or overwriting a file written and synced once.
func probeFsync(overwrite bool) func(Job) (Limit, error) {
	return func(j Job) (Limit, error) {
		l := Limit{Name: "4 KiB append to a growing file + fdatasync"}
		if overwrite {
			l.Name = "4 KiB overwrite in a pre-written file + fdatasync"
		}
		f, err := os.Create(filepath.Join(j.Dir, fmt.Sprintf("fsync-%v", overwrite)))
		if err != nil {
			return l, err
		}
		defer f.Close()
		page := newBodyPool(pageSize).body(0)
		if overwrite {
			zero := make([]byte, int64(j.FsyncOps)*pageSize)
			if _, err := f.Write(zero); err != nil {
				return l, err
			}
			if err := f.Sync(); err != nil {
				return l, err
			}
		}
		var h Hist
		start := time.Now()
		for i := range j.FsyncOps {
			t := time.Now()
			if _, err := f.WriteAt(page, int64(i)*pageSize); err != nil {
				return l, err
			}
			if err := fdatasync(f); err != nil {
				return l, err
			}
			h.Record(time.Since(t))
		}
		l.OpsPerSec = float64(j.FsyncOps) / time.Since(start).Seconds()
		l.P50, l.P99 = h.Quantile(0.5), h.Quantile(0.99)
		l.Note = fmt.Sprintf("%d syncs; ops/s bounds one writer that syncs per message", j.FsyncOps)
		return l, f.Close()
	}
}
