package vfs

import "time"

// HugeRanger is implemented by the mappings of real files on Linux, whose
// paging advice can be set for the part of the mapping ahead of a writer.
// Like Pager's calls it is a hint that never changes a byte.
type HugeRanger interface {
	// HugePagesFrom gives the whole pages from off to the end of the
	// mapping no read-ahead (MADV_RANDOM) and huge pages (on:
	// MADV_HUGEPAGE) or single pages (off: MADV_NOHUGEPAGE). Folios
	// already in memory keep their size.
	HugePagesFrom(off int, on bool)
}

// HugeAhead gives the next file of a fast sequential writer huge pages,
// and takes them away from the rest of a file whose writer turns slow.
//
// A write into a page of a fresh file mapping takes a page fault that on
// this kind of virtual machine costs 5-20 µs for a 4 KiB page, and under
// 1 µs a page when the kernel brings in a 2 MiB folio at once (huge
// pages, mapped with one entry): for a store writing small index entries
// at a million a second, most of its system time. But a write marks its
// whole folio dirty, and a sync writes the whole folio back: a slow
// writer synced every second would write 2 MiB back for a few entries.
// So the advice follows the writer's rate: every hugeStep bytes it
// compares the time the writer took for them with what fills a huge folio
// within hugeFillTime. A writer above that rate at the end of a file
// gets its next file on huge pages from the start (NewHugeAhead with on);
// one below a quarter of it gets single pages without read-ahead from
// where it is. The advice is not switched on in the middle of a file:
// the kernel's read-ahead of a mapping written in order brings small
// folios ahead of the writer, and a huge folio never comes where small
// ones are (on Linux 6.18 here a file advised from its second 2 MiB on
// got a fraction of its folios huge), while a mapping advised before its
// first write gets all of them.
//
// The zero value does nothing: NewHugeAhead makes one for a mapping that
// offers HugeRanger. Wrote is called by the mapping's one writer; a
// HugeAhead is not safe for concurrent use.
type HugeAhead struct {
	r    HugeRanger
	next int       // the writer position of the next check
	at   time.Time // when the writer passed the last check (zero: none yet)
	on   bool      // the writer was fast at the last check
	huge bool      // the mapping has huge pages ahead of the writer
	set  bool      // some advice was given (Done undoes the read-ahead part)
}

const (
	// hugeStep is how often (in bytes written) the rate is checked.
	hugeStep = 64 << 10
	// hugeFolio is the folio the kernel brings in under MADV_HUGEPAGE.
	hugeFolio = 2 << 20
	// hugeFillTime: a writer that fills a huge folio faster (2 MiB a
	// second) gets huge pages. The store syncs its indexes every second
	// by default, so that such a folio is mostly written when it is
	// written back.
	hugeFillTime = time.Second
)

// NewHugeAhead returns the HugeAhead of m, a new file, for a writer
// starting at position from: with huge pages (and no read-ahead) from
// there on if on (a writer known to be fast: the previous file's On),
// else left as it is. For a mapping that does not offer HugeRanger
// (memory, other systems) it returns one that does nothing.
func NewHugeAhead(m Mapping, from int, on bool) HugeAhead {
	r, ok := m.(HugeRanger)
	if !ok {
		return HugeAhead{}
	}
	h := HugeAhead{r: r, next: from + hugeStep}
	if on {
		h.on, h.huge, h.set = true, true, true
		h.at = time.Now()
		r.HugePagesFrom(from, true)
	}
	return h
}

// Done gives the mapping of a file that is no longer written its
// read-ahead back (Pager's SmallPages(false)), for readers of what was
// written; huge pages stay where they were given.
func (h *HugeAhead) Done() {
	if p, ok := h.r.(Pager); ok && h.set {
		p.SmallPages(false)
	}
}

// On reports whether the writer was fast at the last check: its next
// file should start on huge pages.
func (h *HugeAhead) On() bool { return h.on }

// Wrote tells h the writer's position pos (bytes from the start of the
// mapping). It costs a comparison until the writer passes the next check.
func (h *HugeAhead) Wrote(pos int) {
	if pos < h.next || h.r == nil {
		return
	}
	h.check(pos, time.Now())
}

// check compares the time since the last check with what a fast writer
// takes for the bytes since then; a writer turning slow loses the huge
// pages ahead of it.
func (h *HugeAhead) check(pos int, now time.Time) {
	covered := pos - (h.next - hugeStep)
	h.next = pos - pos%hugeStep + hugeStep
	last := h.at
	h.at = now
	if last.IsZero() {
		return // the first check: the rate is known at the next
	}
	// The time a fast writer takes for covered bytes.
	fast := time.Duration(int64(hugeFillTime) * int64(covered) / hugeFolio)
	took := now.Sub(last)
	switch {
	case !h.on && took <= fast:
		h.on = true
	case h.on && took > 4*fast:
		h.on = false
		if h.huge {
			h.huge = false
			h.r.HugePagesFrom(pos, false)
		}
	}
}
