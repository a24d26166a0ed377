//go:build linux

package mqlite

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeSlotBytes is the table size from which the slots live in their own
// mapping, advised to use transparent huge pages: a lookup is a random
// access into the table, and with 4 KiB pages a table of many megabytes
// misses the TLB on nearly every one (a page walk, dearer still in a
// virtual machine). 2 MiB pages cover a 32 MiB table with 16 entries.
const hugeSlotBytes = 4 << 20

// hugePage is the size the mapping is aligned to.
const hugePage = 2 << 20

// allocSlots returns n zeroed slots and the memory to release with
// freeSlots (nil when they are ordinary Go memory).
func allocSlots(n int) ([]idSlot, []byte) {
	size := n * int(unsafe.Sizeof(idSlot{}))
	if size < hugeSlotBytes {
		return make([]idSlot, n), nil
	}
	mem, err := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return make([]idSlot, n), nil // the kernel refused: the Go heap will do
	}
	skip := 0
	if r := int(uintptr(unsafe.Pointer(&mem[0])) % hugePage); r != 0 {
		skip = hugePage - r
	}
	slots := mem[skip : skip+size]
	_ = unix.Madvise(slots, unix.MADV_HUGEPAGE) // advice: without it, 4 KiB pages
	return unsafe.Slice((*idSlot)(unsafe.Pointer(&slots[0])), n), mem
}

// freeSlots releases what allocSlots mapped.
func freeSlots(mem []byte) {
	if mem != nil {
		_ = unix.Munmap(mem)
	}
}
