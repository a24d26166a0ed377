// Package commitlog owns mqlite's CommitLog: one append-only log of records
// kept in fixed-size segment files that are preallocated and memory-mapped.
// It is usable on its own (it imports nothing of the root package): the
// caller supplies each record's payload through the Appender interface, and
// this package owns the frame around it, the segments, flushing and
// recovery.
//
// # Files
//
// Segments live in one directory, each exactly Options.SegmentSize bytes
// (default 1 GiB), named by the global offset of their first byte as 20
// zero-padded decimal digits (00000000000000000000, 00000000001073741824,
// ...). A global offset is a segment's start plus a position inside it.
// Beside them: up to two spares, <start>.spare, segments DeleteBefore
// dropped and kept to become next segments (recycling, below). An empty
// file readers, which read-only openers of earlier versions locked, is
// ignored.
//
// # Record frame (little-endian)
//
//	pos  size  field
//	  0     4  TOTALSIZE  uint32, whole record including this frame
//	  4     4  MAGIC      uint32, MagicV1 = 0x4D514C31 ("MQL1"); names the format version
//	  8     4  CRC        uint32, CRC32-C over bytes [0,8) and [12,TOTALSIZE)
//	 12     8  PHYSOFFSET int64, the record's own global offset
//	 20     8  SYNCED     int64, how far the log was durably flushed when written
//	 28     …  payload    owned by the caller (mqlite: package message)
//
// A zero TOTALSIZE (the preallocated, zeroed space) never parses as a record.
// A record never straddles two segments: when a record (plus room for a blank
// marker) does not fit in what is left of a segment, a 12-byte blank marker
// is written instead (TOTALSIZE = bytes left in the segment, MAGIC =
// BlankMagic 0x424C4E4B ("BLNK"), CRC32-C of the first 8 bytes) and the
// record goes to offset 0 of the next segment, as RocketMQ does.
//
// RocketMQ differs: it checksums only the body (IEEE CRC-32 with the top bit
// cleared), is big-endian, and has no SYNCED field.
//
// # Recovery
//
//  1. List the directory: keep names of 20 digits; remove *.tmp and
//     *.spare; ignore and log anything else but readers. Segments must be contiguous (a gap or overlap is an
//     ErrCorrupt naming the file) and exactly SegmentSize long, except a
//     short last segment, which is an interrupted allocation and is extended.
//     The first segment may start anywhere: retention removed those before
//     it, and MinOffset is its start.
//  2. Validate records from Options.RecoverFrom (rounded down to its
//     segment; by default the third-to-last segment, or after an unclean
//     shutdown the segment holding Options.Trusted when that is earlier)
//     forward: size within bounds and the segment, magic, CRC, stored
//     offset equal to position. A blank marker moves to the next segment.
//     When the log ends early, validation goes back to the third-to-last
//     of the segments it keeps, where the next Open starts: what this
//     Open accepts, the next one accepts too.
//  3. The first position X that is not a valid record (zeros, garbage or a
//     torn record) ends the log, unless it is proven to be damage rather
//     than a torn tail: a valid record later in the log whose SYNCED field
//     is past X (X was on disk before that record was written), or valid
//     records after X while Options.Trusted (the checkpoint's flushed
//     offset) is past X. Proven damage fails Open with an ErrCorrupt that
//     names the segment and offset; nothing is changed.
//  4. Otherwise it is a torn tail: X's segment is zeroed from X to the end
//     of X's page or of the last frame header past X that stores its own
//     offset (valid or torn), whichever is further; later segments are
//     deleted; and Report says how many bytes and how many valid-looking
//     records were discarded. Past that point nothing can ever pass for a
//     record of this segment, so a recycled segment's old records stay.
//     When the end is below Options.Trusted (the tail was damaged, cut or
//     zeroed, or the last segment file is missing, with nothing valid
//     after it), Report.LostFlushed says how many flushed bytes are gone,
//     and an error is logged.
//
// # Retention
//
// The store's retention policy looks at Segments (start, path, sealed) and
// calls DeleteBefore(offset), which removes every segment that ends at or
// below offset, oldest first, never the write segment (the last):
//
//  1. Remove the oldest segment's file, then sync the directory, so that
//     each removal is durable before the next: an interruption (an error, a
//     crash) leaves a contiguous run of segments, which Open accepts. A
//     failed directory sync fences the log, since a lost removal could come
//     back in front of a later one that survived, a gap Open rejects.
//  2. Publish a segment list without it: MinOffset, the first segment's
//     start, moves up, and reads below it fail with ErrNotFound ("offset …
//     was removed"). MinOffset is not stored anywhere else.
//  3. Unmap it once no reader can see it. Read, Scan and Flush pin the
//     current list (an immutable snapshot) with an atomic add and take no
//     lock; a removed segment is retired (file gone, mapping and handle
//     kept) until every snapshot holding it has drained. The last reader to
//     leave such a snapshot unmaps it; Close waits for readers and unmaps
//     what is left.
//
// Where a mapped file cannot be removed or renamed (Windows;
// vfs.MustUnmapFirst), the steps run 2, 3, 1: the segment is retired, and
// its file goes (then the directory sync) once it is unmapped; while a
// reader holds it, DeleteBefore goes no further, so files still go oldest
// first (unmapfirst.go).
//
// DeleteBefore never takes the append lock, and the segment-list lock only
// for bookkeeping: removing, syncing and unmapping run outside every lock
// Append takes, so a cleanup delays sends only through the CPU and kernel
// work it costs (see BenchmarkAppendLatencyDuringDelete).
//
// # Recycling
//
// Unless Options.NoRecycle is set, step 1 renames a segment it drops to
// <start>.spare instead of removing it while there are fewer than two
// spares. Once the segment is unmapped (step 3) the allocator makes a spare
// the next segment: it renames it to the new name and syncs the directory,
// as for a new file. The pages of a recently written file are most likely
// still in memory and its blocks allocated, so pre-faulting it costs about
// a quarter of what a new file's pages cost, and memory the machine never
// used is not touched at all (BenchmarkAppend, 4 KiB: see docs/performance.md). A
// spare whose pages are mostly not in memory (mincore) is removed instead:
// pre-faulting it would read it from disk.
//
// The segment keeps its previous life's records past the write position.
// None can pass for a record of this life: each stores its own global
// offset, and the segment's start has changed. Close writes a zero word
// at the end of the log, so that a clean Open stops there at once; after a
// crash, classifying the tail reads the rest of the segment (for 1 GiB
// here, recovery took 1.1 s against 0.5 s with a new segment), and
// Report.TruncatedBytes counts the old bytes zeroed in the tail's page. A
// read-only opener holds a shared lock (flock) on each segment file while
// it maps it; a lock is on the file, so it follows the file through the
// rename to a spare. Step 1 removes instead of keeping a segment whose
// file is locked so, and the allocator recycles a spare only when it can
// lock the file exclusively (otherwise it removes it), so no reader's
// mapping of a dropped segment is ever rewritten, and a reader that stays
// open keeps only the segments it mapped from being recycled. DropSpare
// removes the spares; a store short of disk space calls it.
//
// # Read-only open
//
// With Options.ReadOnly the log is opened beside a process that may be
// appending to it (or a stopped or crashed one), and nothing is changed:
//
//  1. List the segments as in step 1 of Recovery, removing nothing. Lock
//     each file shared, for as long as the segment is mapped (one
//     descriptor a segment), so that the owner does not recycle it. A file
//     the name no longer names once locked, or one the owner holds
//     exclusively as a spare, was just removed; a lock refused for another
//     reason (the descriptor limit, say) leaves the segment unprotected,
//     with a warning. Open each O_RDONLY and map it read-only, closing the
//     descriptor. A short last segment is one the owner is allocating: it
//     is left out. A missing first segment was just removed by the owner's
//     retention: it is skipped.
//  2. From the last segment that begins with a valid record, validate
//     records as in step 2 of Recovery. The first position that is not a
//     valid record ends the log: zeros, a record the owner is writing at
//     this moment, or a torn tail (which is not repaired, nor told apart
//     from damage; Verify reports damage).
//
// The log is then a view as of Open: records appended later are not
// visible. Append, Flush and DeleteBefore fail with ErrReadOnly. Segments
// the owner's retention removes stay readable through the mappings.
//
// # Flushing
//
// Flush syncs what was appended since the last flush (msync of each
// segment's range). Before syncing a range it drops the range's complete
// pages from the page tables (vfs.Dropper, MADV_DONTNEED): the kernel
// must write-protect every writable page table entry of a page before
// writing the page back, one TLB shootdown (an inter-processor interrupt)
// per page, which on a virtual machine cost a third of all CPU time in a
// steady stream of small appends; dropping the entries of a whole range
// first costs one. The data stays in the page cache and dirty pages are
// still written back; the page holding the write position is kept. Once
// synced, the dropped pages are mapped again in one call, read-only and
// clean (MADV_POPULATE_READ), so that the readers behind the writer (the
// dispatcher, consumers) do not fault them in one by one, and nothing of
// them is left to write-protect.
//
// With Options.SmallSyncs (a log flushed a few records at a time, as a
// FlushSync store's group commit does) the write segment's mapping has
// read-ahead off (vfs.Pager, MADV_RANDOM) until it is sealed. Pre-faulting
// ahead of the writer otherwise triggers the kernel's read-ahead, which
// fills the page cache in large folios; ext4 marks a whole folio dirty at
// the first write into it, and each flush would write the folio back (up
// to 1 MiB for one small record; BenchmarkFlushAfterBurst). Without it the
// segments to be written are mapped for huge pages instead (vfs.Pager,
// MADV_HUGEPAGE): a 2 MiB folio then takes one page table entry, and the
// writer's first touch of each page, ~1.5-2.4 µs with 4 KiB entries on a
// virtual machine, mostly goes away.
//
// A log with SmallSyncs on a file system whose writes reach its mappings
// (vfs.WritesReachMappings: Linux, MemFS) does not store into the mapping
// at all: an append encodes its records into a buffer and writes them into
// the segment file with one WriteAt (pwrite), readers keep reading through
// the mapping, and Flush syncs the range as before (on Linux, msync of a
// shared file mapping is fdatasync of the range). The mapping's page-table
// entries then stay clean and read-only, so a sync writes pages back with
// nothing to write-protect and the writer takes no fault to make them
// writable again; the warming ahead of the writer faults pages in for
// reading. A group commit round (BenchmarkSyncRound) took about half the
// time (through.go). Such a log also has the allocator write zeros ahead of
// the writer in a new segment and sync them (vfs.Prewriter), so that the
// file system's conversion of preallocated ("unwritten") blocks is
// committed off the writer's path and the writer's sync writes data only:
// a 4 KiB round took about a third less again (prewrite.go).
//
// # Caveats
//
// A Record's Payload aliases mapped memory: it is valid only inside the
// callback. A callback that blocks keeps its segments mapped, and after
// DeleteBefore their disk space allocated, until it returns; RocketMQ
// instead force-releases a referenced file after 120 s, which can fault a
// slow reader. A callback must not call Close, which waits for it.
package commitlog
