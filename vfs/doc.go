// Package vfs is the file seam of mqlite: every file, directory, mapping,
// sync, preallocation, rename, removal and lock of a Store and of the
// storage packages (commitlog, consumequeue, indexfile) goes through the
// FS interface, and nothing else touches the disk. That lets the same
// engine run on
//
//   - OS, the real file system (segments mapped with mmap, synced with
//     fdatasync/msync, F_FULLFSYNC on macOS, FlushViewOfFile and
//     FlushFileBuffers on Windows);
//   - NewMem, a file system in memory that never loses a byte (what
//     mqlite.Options.InMemory uses);
//   - NewFaulty, a wrapper that fails the operations an Injector picks and
//     tracks what has been made durable, so that Crash can build the file
//     system a power loss would leave.
//
// Three wrappers change what any FS allows: ReadOnly refuses every change
// (a read-only Store), WithModes creates files and directories with fixed
// permissions (Options.FileMode), and NewStrictMapFS refuses what Windows
// refuses on a mapped file, so that the order Windows needs can be tested
// on any system.
//
// A program selects the file system of a Store with mqlite.Options.FS, and
// of a storage package with its Options.FS; nil means OS. A user's fault
// test wraps NewMem in NewFaulty, runs the store, injects errors, takes
// a Crash image and opens the store again on it (see the root package's
// ExampleOptions_fs).
//
// # The contract of an FS
//
// An implementation of FS, File and Mapping, including a wrapper written
// outside this package, must keep the following; the engine's durability
// promises rest on it and on nothing more.
//
// Names are paths as filepath builds them; an implementation cleans them.
// FS, File and Mapping methods may be called from several goroutines at
// once: ReadAt and WriteAt on different ranges of one file, Sync of one
// range of a mapping while other goroutines write or read other ranges.
//
// Errors. A file or directory that does not exist is reported with an
// error that matches ErrNotExist (os.ErrNotExist) under errors.Is,
// preferably an *os.PathError: recovery relies on it to tell a missing
// file (a state it repairs) from a failing one. A lock held elsewhere is
// ErrLocked. A change refused by ReadOnly is ErrReadOnly, one refused by
// StrictMapFS is ErrMapped. Every other error is a failure of the
// device: the engine wraps it with mqlite.ErrIO, keeps it in the chain
// (so errors.Is finds the injected or operating-system error too) and,
// when a write or a sync of the CommitLog failed, fences the store: later
// writes fail with ErrFenced until it is reopened, since the state of the
// unsynced bytes is then unknown. An FS must therefore never return nil
// from a sync that did not make the data durable, and the engine never
// assumes that a later successful sync covers bytes an earlier failed one
// was for.
//
// Durability. Nothing written is durable until a sync covering it
// returns nil:
//
//   - File.Sync: the file's contents and length as of the call, whether
//     they were written with WriteAt or through a mapping, survive a power
//     loss. It does not make the file's directory entry durable.
//   - Mapping.Sync(off, n): the bytes [off, off+n) of the mapping as of
//     the call survive, and so does a file length covering the mapping.
//     An aligned 4-byte word that a writer stores atomically while the sync
//     runs is kept either old or new, never torn. Other bytes of the
//     mapping carry no promise.
//   - SyncDir(dir): the entries of dir as of the call (files created,
//     renamed into or removed from it) survive. Until then a power loss
//     may undo any of those changes; Rename is atomic, so a renamed file
//     is found under one of its names, never both.
//
// A write that is not yet synced may survive a power loss whole, in part
// (any subset of its pages, a page possibly torn) or not at all; a file
// that grew may keep its new length with zeros where unsynced bytes were.
// The engine's checksums and recovery are built for exactly that.
//
// Files. Allocate(size) reserves the blocks of [0, size), making the
// length at least size, so that a later write through a mapping cannot
// fail for lack of space (which would be a fault, not an error). Map(size)
// needs size no larger than the file's length; the mapping shares the
// file's bytes (what is written through it is what ReadAt returns) and
// stays valid after the File is closed, until Unmap. A file opened
// O_RDONLY refuses writes, and its mappings are read-only.
//
// Locks. Lock and LockShared lock the file, not the name, without
// waiting: a held conflicting lock is ErrLocked at once. Within the
// process, a lock is released by closing what Lock returned, and only
// then.
//
// Unmapping first. Windows refuses to remove, rename or truncate a file
// while a mapping of it is open; the engine then unmaps before it does
// any of these. It asks MustUnmapFirst, which is true for OS on Windows
// and for any FS with a method UnmapsFirst() bool that reports true. A
// wrapper of another FS should forward UnmapsFirst (MustUnmapFirst of
// what it wraps), as the wrappers of this package do: otherwise a store
// on a wrapped Windows file system fails where it retires segments.
//
// Writing beside a mapping. WritesReachMappings reports whether
// File.WriteAt into a file is seen at once through the file's shared
// mappings and made durable by their Mapping.Sync, as a store through the
// mapping is (OS on Linux, MemFS, and any FS with a method
// WritesReachMappings() bool that reports true; the wrappers of this
// package forward it). A FlushSync CommitLog then writes with WriteAt and
// reads through the mapping; a wrapper that does not forward it only
// keeps the store writing through the mapping.
//
// Optional interfaces. Usager reports the use of a volume (for
// Options.DiskMaxUsedRatio); without it the store does not watch the
// disk. A File may implement Prewriter (zeros written and made durable
// ahead of a writer, its own operation for fault injection); without it a
// FlushSync CommitLog writes into its new segments as they are. A Mapping may implement Dropper and Pager, hints about its page
// tables that never change a byte; without them nothing is lost. Populate,
// PopulateRead, Resident and DataRanges are such hints for the memory and
// files of the real file system, used by the storage packages; elsewhere
// they do nothing or give the answer that is always safe.
//
// # What a Faulty power-loss image keeps
//
// Faulty keeps, beside the live file system it wraps, a durable image: a
// file's bytes as of its last successful File.Sync, plus each range a
// Mapping.Sync or a Prewrite covered since, and the directory entries as of the last
// successful SyncDir of their directory. A file that already existed in
// the wrapped FS when Faulty first opened it counts as durable as it was
// then, so that an image can be wrapped and crashed again. Crash(rng, p)
// builds a new MemFS from it:
//
//   - every synced entry, and each entry created or renamed since with
//     probability p (removals not yet synced are undone);
//   - in each file, its durable bytes, each 4 KiB page whose live bytes
//     differ replaced by them with probability p (the copy of a page being
//     written may be torn), and, with probability p, the file's unsynced
//     growth (zeros beyond the durable bytes, where no page was kept).
//
// p = 0 keeps exactly what was synced; p = 1 keeps every live byte and
// entry (unsynced removals are still undone). Only files
// opened through the Faulty wrapper appear in the image. The Injector is
// asked before every operation but Stat, ReadDir, Lock, LockShared, Size,
// Close and Unmap, with the path of the file or directory; the error it
// returns is what the operation returns, and the operation is not done.
package vfs
