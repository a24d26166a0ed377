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
//  1. List the directory: keep names of 20 digits; remove *.tmp; ignore and
//     log anything else. Segments must be contiguous (a gap or overlap is an
//     ErrCorrupt naming the file) and exactly SegmentSize long, except a
//     short last segment, which is an interrupted allocation and is extended.
//  2. Validate records from Options.RecoverFrom (rounded down to its
//     segment; by default the third-to-last segment, or after an unclean
//     shutdown the segment holding Options.Trusted when that is earlier)
//     forward: size within bounds and the segment, magic, CRC, stored
//     offset equal to position. A blank marker moves to the next segment.
//  3. The first position X that is not a valid record (zeros, garbage or a
//     torn record) ends the log, unless it is proven to be damage rather
//     than a torn tail: a valid record later in the log whose SYNCED field
//     is past X (X was on disk before that record was written), or valid
//     records after X while Options.Trusted (the checkpoint's flushed
//     offset) is past X. Proven damage fails Open with an ErrCorrupt that
//     names the segment and offset; nothing is changed.
//  4. Otherwise it is a torn tail: the rest of X's segment is zeroed, later
//     segments are deleted, and Report says how many bytes and how many
//     valid-looking records were discarded.
package commitlog
