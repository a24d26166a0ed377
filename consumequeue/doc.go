// Package consumequeue owns mqlite's consume queues: one index per (topic,
// queue id) of fixed 20-byte entries pointing into the CommitLog, after
// Apache RocketMQ's ConsumeQueue. A single dispatcher goroutine per queue
// appends entries; any number of consumers read them concurrently without
// locks. The package stores offsets, sizes and opaque codes and never parses
// messages, so a broker builder can use it alone; it imports only the
// standard library and mqlite's public file seam (package vfs) and
// sentinels (internal/errs).
//
// A Queue is addressed by logical offset: the n-th message of the queue has
// logical offset n. Entries [MinOffset, MaxOffset) can be read; MaxOffset is
// the next offset to be written. A Store opens every queue under a root
// directory and creates queues on demand; a created queue makes its
// directory and meta file only when its first entry is appended, so a
// queue that is only read or waited on leaves nothing on disk.
//
// # Layout
//
//	{root}/{topic}/{queueId}/meta                  format header
//	{root}/{topic}/{queueId}/00000000000000000000  entries [0, N)
//	{root}/{topic}/{queueId}/00000000000001310720  entries [N, 2N) (N = EntriesPerFile: 65,536 here)
//
// Topic names are 1 to 255 characters from [A-Za-z0-9_%|-]; queue ids are
// canonical decimal numbers. Data files are named by the 20-digit
// zero-padded logical BYTE offset of their first entry (first entry index ×
// 20), as in RocketMQ, so entry q lives at logical byte q×20. Every data
// file is exactly EntriesPerFile×20 bytes, preallocated (File.Allocate)
// before it is mapped and written through the mapping.
//
// # Format (version 1, little-endian)
//
// meta, 16 bytes, written atomically (vfs.WriteFileAtomic) when the queue
// directory is created:
//
//	offset size field
//	0      4    magic "MQCQ"
//	4      4    uint32 format version (1)
//	8      4    uint32 entries per file
//	12     4    uint32 CRC32-C (Castagnoli) of bytes [0, 12)
//
// A meta file with another version or entries-per-file than the options is
// refused with ErrIncompatible; a damaged one (or data files without one)
// with a *CorruptError.
//
// Data files are pure arrays of entries, 20 bytes each:
//
//	offset size field
//	0      8    int64  CommitLog offset of the record (>= 0)
//	8      4    int32  record total size (> 0)
//	12     4    uint32 tags code, opaque (mqlite: hash of the tags, or the
//	                   delivery time in seconds for delay queues)
//	16     4    uint32 CRC32-C (Castagnoli) of bytes [0, 16)
//
// Zero means invalid: an all-zero slot fails its CRC, so preallocated space
// never parses as an entry. An entry is valid when its CRC matches, its size
// is positive and offset+size does not overflow.
//
// The filler entry (offset 0, size MaxInt32, tags code 0, valid CRC) fills
// the slots before the first entry of a queue whose first logical offset is
// not zero (a new queue, or one emptied by retention, whose next entry comes
// after a hole, or one moved on by Queue.Restart), as RocketMQ does;
// MinOffset is then the first real entry, or MaxOffset if there is none.
// The queue restarts in the file holding that entry, so fillers only ever
// appear at the start of the first file. Size MaxInt32 is reserved for them.
//
// # Recovery (Open)
//
//  1. Validate the options; create the directory and meta if both are new;
//     else check meta (magic, CRC, version, entries per file: a damaged
//     version field is a *CorruptError, not another version).
//  2. List the data files. Names that are not 20 digits are ignored; a
//     20-digit name that is not a multiple of the file size is a
//     *CorruptError. Files must be contiguous: at the first gap, that file
//     and all later ones are dropped.
//  3. Trust all files but the last three (RocketMQ scans from the
//     third-to-last file), unless one has the wrong size, in which case scan
//     from it. Trusted files are only checked by CRC when read.
//  4. Bring each scanned file to the file size (a short or zero-length file
//     is extended with zeros, a long one truncated), map it, and accept
//     entries while they are valid and point forward (offset >= previous
//     entry's end; fillers only at the start of the first file). Stop at the
//     first entry that is not: the write position, MaxOffset, is there.
//  5. Never trust anything after it: zero the rest of that file and sync
//     it, and remove all later files (and that file too if it is left empty
//     and is not the first: only the first file may be empty, so the last
//     entry, MaxPhysEnd, survives). Valid entries after a damaged one are
//     thus dropped (and logged); they are derived data, and re-dispatching
//     the CommitLog from MaxPhysEnd rebuilds them.
//  6. If step 5 dropped files, the next Open's window (the newest three
//     files) reaches back over files this one trusted: check them too,
//     and drop from a damaged entry there as in step 5, until the window
//     holds only checked files. TruncateAfterPhys does the same after it
//     drops files. So consecutive Opens agree: what one accepted, the next
//     accepts, and a damaged entry the next would drop is dropped (and
//     rebuilt by re-dispatch) now, not served as an error meanwhile.
//  7. A meta file with no data file is a queue that lost its first file
//     (the first file is never removed): it is marked repaired, with
//     MaxPhysEnd 0, so re-dispatch rebuilds it from the CommitLog's start.
//     So is a directory with neither, which lost both (its meta file is
//     written again).
//  8. MinOffset is the first non-filler entry of the first file, MaxPhysEnd
//     the end of the last entry. MinOffset is not persisted: call
//     DeleteBelowPhys with the CommitLog's minimum offset after Open. After a
//     CommitLog recovery that truncated the log, call TruncateAfterPhys.
//
// Open never panics on damaged files and never maps past the end of a file.
// Trusting older files assumes Flush keeps up (RocketMQ flushes consume
// queues every second): unsynced entries must not span more than the last
// three files when the power fails, i.e. flush at least once per two files'
// worth of appends.
//
// # Read-only open
//
// With Options.ReadOnly, queues are opened beside the process that writes
// them (or a stopped or crashed one) without changing anything:
//
//  1. No directory or meta file is created: a missing one is an empty
//     queue (the writer creates both before any data file). A damaged meta
//     file fails as in step 1 above; its entries per file are taken as
//     they are (Options.EntriesPerFile does not apply).
//  2. Data files are listed as in step 2; from the first gap, or the
//     first file that is not exactly the file size (one the writer is
//     creating), nothing is mapped. Each file is opened O_RDONLY and
//     mapped read-only.
//  3. Entries are accepted as in steps 3 and 4, and the first invalid one
//     (one the writer is appending at that moment, or damage) ends the
//     queue. Nothing is zeroed, extended, truncated or removed.
//
// TruncateAfterPhys then only hides the entries past the given CommitLog
// end (MaxOffset moves back), and DeleteBelowPhys only moves MinOffset.
// Store.CatchUp(limit) takes in what the writer added since: new queue
// directories and data files, and new entries whose record ends at or
// below limit. Append fails with ErrReadOnly; Flush does nothing. Files
// the writer removes stay readable through the mappings.
//
// # Concurrency
//
// Append publishes an entry by storing MaxOffset atomically after writing
// its bytes; readers load MaxOffset before reading, so they never see a
// partial entry. The mapped files form a copy-on-write snapshot behind an
// atomic pointer; a reader pins the current snapshot (a per-snapshot
// counter), takes no lock and never blocks the writer; a reader whose
// snapshot was superseded while it read retries. The one in-place rewrite
// of published slots (TruncateAfterPhys, used in recovery) bumps a
// generation counter, and readers retry across it; a hole fill in an
// emptied queue starts a fresh file instead. Readers verify each entry's
// CRC and report damage as a *CorruptError.
//
// # Caveats
//
//   - Entries live in shared mapped memory. Readers copy them out; nothing
//     returned aliases the mapping.
//   - Files removed by DeleteBelowPhys or TruncateAfterPhys stay mapped (and
//     occupy disk space) until every reader that pinned a snapshot holding
//     them is done. New readers only pin the current snapshot, so this takes
//     one short read at most; it is checked whenever a snapshot is published
//     and by Flush and Close. Where a mapped file cannot be removed
//     (Windows; vfs.MustUnmapFirst) the order is reversed: the file is
//     removed once unmapped, and until then stays on disk.
//   - Entries are durable only after Flush. A failed sync fences the queue:
//     writes return ErrFenced until it is reopened, and Close does not flush.
//   - One writer per queue: Append is serialised by a mutex, but entries
//     must arrive in logical order, so only one dispatcher should feed a
//     queue.
package consumequeue
