// Package indexfile owns mqlite's key index: a hash index from string keys
// to CommitLog offsets, after Apache RocketMQ's IndexFile, kept in a
// sequence of fixed-size mapped files. One dispatcher goroutine writes it
// (Put); any number of goroutines query it (Query) without blocking the
// writer.
//
// It stores hashes, offsets and times and never parses messages, so a
// broker builder can use it alone: it imports neither the root package nor
// commitlog nor consumequeue. The caller decides which keys a record has
// (mqlite indexes "topic#key" for the unique key and each user key).
//
// # Files
//
// Files live in the directory the caller passes (the store uses index/),
// each named by the 20-digit zero-padded commitlog offset of its first
// entry, e.g. 00000000000001048576. RocketMQ names files by creation time;
// naming by offset orders files the way retention (DeleteBelowPhys) and
// recovery (TruncateAfterPhys, re-dispatch from EndPhyOffset) think, and
// lets Open check that each file begins where the previous one ends. A new
// file is created, by the Put that finds the newest file full, with that
// Put's offset and time as its begin values (RocketMQ seeds a new file from
// the previous file's end values and overwrites them on its first put: the
// same result). Each file is preallocated (File.Allocate) to its full size
// before it is mapped; nothing is mapped past the end of a file.
//
// All integers are little-endian. A file is a header, a slot table and an
// entry array:
//
//	offset                    size
//	0                         64            header
//	64                        4*slots       slot table
//	64 + 4*slots              24*entries    entries 1..entries
//
// Header (64 bytes; bytes 16..56 are RocketMQ's 40-byte header fields, the
// rest make a file self-describing and checksummed):
//
//	off size field
//	  0    4 magic "MQIX"
//	  4    2 format version, 1 (FormatVersion)
//	  6    2 flags: bit 0 "dirty" (may hold entries past flushedCount); others 0
//	  8    4 slot count
//	 12    4 entry capacity
//	 16    8 beginTimestamp: store time (Unix ms) of the first entry
//	 24    8 endTimestamp: greatest store time put so far
//	 32    8 beginPhyOffset: offset of the first entry (= the file name)
//	 40    8 endPhyOffset: offset of the newest entry
//	 48    4 hashSlotCount: slots that became non-empty
//	 52    4 indexCount: next entry number; starts at 1 (0 is "none")
//	 56    4 flushedCount: indexCount as of the last Flush
//	 60    4 CRC32-C (Castagnoli) of bytes 0..60
//
// Slot i (4 bytes) holds the entry number of the newest entry whose bucket
// is i, 0 if none. Entry n (n >= 1) is at 64 + 4*slots + 24*(n-1):
//
//	off size field
//	  0    4 key hash (never 0)
//	  4    8 commitlog offset
//	 12    4 seconds since beginTimestamp (clamped to [0, 2^32-1])
//	 16    4 previous entry number in the same bucket, 0 = end of chain
//	 20    4 CRC32-C of bytes 0..20
//
// RocketMQ's entry is 20 bytes; mqlite adds the CRC because every mqlite
// record carries a checksum, so a torn or flipped entry ends its chain
// instead of sending a reader to a wrong offset. The key hash is xxhash64
// of the key folded to 32 bits (low xor high half), with 0 mapped to 1 so a
// zeroed entry never parses; bucket = hash % slots. Zero is invalid in
// every field that could be mistaken for data: magic, version, entry number.
//
// # Defaults
//
// DefaultSlots is 1<<20 (a 4 MiB slot table) and DefaultEntries 4,000,000
// (96,000,000 bytes), so a file is 64 + 4,194,304 + 96,000,000 =
// 100,194,368 bytes (about 96 MiB). That is about 3.8 entries per bucket
// when full, close to RocketMQ's 4 (5,000,000 slots, 20,000,000 entries,
// 420,000,040-byte files), so a lookup reads a handful of entries per
// file. The file is a quarter of RocketMQ's because an embedded store pays
// for its first file in full on day one, and it holds the keys of 2 to 4
// million records at one or two keys each. Tests use tiny counts (8 slots,
// 32 entries) so that files fill and chains collide. Each file records its
// own counts, so changing Options affects only new files.
//
// # Time resolution
//
// Entries store whole seconds since the file's begin time, as RocketMQ
// does. Query matches an entry when its recorded second [t, t+999 ms]
// overlaps [from, to]: it never misses an entry whose store time is in
// range, but may return ones up to 999 ms outside it; callers that need
// millisecond precision check the record's store time. A store time below
// its file's begin time (a clock that stepped back) is recorded as the
// begin time.
//
// # Concurrency
//
// The file list is an immutable slice behind an atomic pointer, replaced on
// each change. Put writes the entry, then publishes the new count (and end
// values) with atomic stores, then stores the slot atomically; a reader
// loads the slot and then the count, and follows only entry numbers below
// that count, so it never reads an entry being written. The header bytes in
// the mapping are the durable copy; readers use the atomics. A deleted file
// is unlinked at once but unmapped only when its last reader finishes
// (reference count).
//
// # Durability and recovery
//
// Index files are derived data: the CommitLog can rebuild them. The first
// Put into a file whose header is clean on disk marks it dirty and syncs
// it, so a clean header always describes synced data; the header then
// stays dirty while the file takes entries and is not rewritten per entry.
// Flush syncs the slots and entries of each changed file without holding
// up Put, then records the synced count as flushedCount in the (still
// dirty) header and syncs that. A full file is sealed (synced, header
// clean) before the next one is created, and Close seals the newest, so
// after a crash only the newest file can be dirty.
//
// Open does, for the files in name order:
//
//  1. Ignore names that are not 20 digits.
//  2. Check the header: length at least 64, magic, CRC, version (a header
//     whose CRC holds with a version other than 1 fails Open with
//     ErrVersion: a newer mqlite's files are not ours to delete; a damaged
//     version field fails the CRC and is damage), then fields: counts within limits, file length
//     = 64 + 4*slots + 24*entries, indexCount <= entries+1, flushedCount <=
//     indexCount, begin offset = file name, begin <= end for offsets and
//     times, and the file begins at or after the previous file's end.
//  3. A file failing step 2 (zero-length, truncated, garbage, wrong size)
//     is logged and deleted together with every newer file: the index must
//     stay a prefix of the CommitLog, since the caller rebuilds it by
//     re-dispatching from EndPhyOffset, which Put then de-duplicates.
//  4. A dirty file is rolled back to its last Flush: the slot table is
//     rebuilt from entries 1..flushedCount-1 (relinking chains around
//     entries whose CRC fails), the end values are recomputed, and a clean
//     header is synced. If it was not the newest file, newer files are
//     deleted as in step 3.
//  5. EndPhyOffset is then the newest trusted entry's offset; the caller
//     re-dispatches the CommitLog from there.
//
// Damage inside a valid file is handled at query time: a chain ends at an
// entry whose CRC fails, whose bucket differs, whose previous number is not
// smaller, or at a slot naming an entry not yet counted. No length read
// from disk is used before it is checked against the file's size.
//
// TruncateAfterPhys(end), for a CommitLog that lost its tail, deletes every
// file whose end offset is >= end (the file containing end too, rather
// than rewinding it in place under concurrent readers); the caller
// re-dispatches from the new EndPhyOffset.
//
// # Read-only open
//
// With Options.ReadOnly the index is opened beside the process that writes
// it (or a stopped or crashed one) and nothing is changed: a missing
// directory is an empty index; files are opened O_RDONLY and mapped
// read-only; a file failing step 2 (or one being created) ends the list,
// and neither it nor newer files are used or deleted; a dirty file is used
// as it is, not rolled back. The newest file may be growing under the
// writer's Put: its header is re-read while its checksum fails (the writer
// rewrites it after every entry), its time range is taken as open-ended,
// and its chains are followed up to its capacity rather than the count in
// the header, each entry being trusted only if its CRC, bucket and
// previous number check out. So a query sees what was indexed at Open and
// maybe some later entries (the caller filters results by what it can
// read), and files created after Open are not seen. Put, Flush,
// TruncateAfterPhys and DeleteBelowPhys fail with ErrReadOnly.
//
// # Caveats
//
// Hash collisions are possible (32-bit hashes; different keys in a bucket):
// Query returns candidates and the caller must compare the key with the
// record's keys. Index memory is mapped: a file's bytes are read straight
// from the mapping and stay valid while a reader holds a reference.
package indexfile
