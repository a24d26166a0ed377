// Command mqlite inspects and checks an mqlite store directory, like
// RocketMQ's mqadmin.
//
// Usage:
//
//	mqlite -dir DIR [-json] [-readonly] <command> [flags] [args]
//
// Commands:
//
//	topics          topics: queues, system or not, stored messages
//	stats           CommitLog positions, queue offsets, group lag, pending transactions
//	consumers       consumer groups: members, subscriptions, committed offset and lag per queue
//	get ID          one message by ID
//	query           messages of a topic by key:   -topic T -key K [-from T1] [-to T2] [-max N]
//	print           messages of a queue:          -topic T [-queue Q] [-offset N | -time T1] [-n N]
//	tail            the last messages of a queue: -topic T [-queue Q] [-n N]
//	verify          check every CommitLog record and ConsumeQueue entry
//	salvage NEWDIR  copy every good record into a new store; list the damaged ranges dropped
//	replication status [DIR]  role, store ID, epochs, CommitLog end, each replica's lag (from the files)
//	rebuild-index   delete the ConsumeQueue and IndexFile and rebuild them from the CommitLog
//
// "mqlite <command> -h" describes a command's flags. -dir and -json may
// also follow the command. Times are RFC 3339 (2006-01-02T15:04:05Z07:00).
// With -json every command prints one indented JSON document (message
// bodies in base64).
//
// Exit status: 0 success; 1 damage found (verify; salvage dropped
// something), or nothing found (get, query, an unknown topic); 2 bad
// usage, or the store cannot be opened.
//
// salvage opens the store read-only (it changes nothing there, and works
// on a store Open refuses as damaged) and creates a new store in NEWDIR,
// which must not exist or be empty; see mqlite.Salvage.
//
// The tool opens the store as a library user does (mqlite.Open), taking
// the directory lock, so a store whose last owner crashed is recovered
// first. When another process holds the store, it says so on stderr and
// opens it read-only instead (mqlite.Options.ReadOnly): no lock, no change
// to any file, a view as of that moment in which the messages the owner
// has not indexed yet are readable by ID but not listed in their queue.
// -readonly asks for that mode even when the store is free (nothing is
// recovered or written). rebuild-index writes the store: it needs the
// owner stopped and refuses -readonly (exit status 2). The segment size
// and ConsumeQueue file size are read from the existing files, so a store
// created with non-default sizes opens as it was written; -segment-size
// overrides the former.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Exit statuses.
const (
	exitOK      = 0
	exitProblem = 1 // damage found, or nothing found
	exitUsage   = 2 // bad usage, or the store cannot be opened
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// command is one subcommand.
type command struct {
	name, args, summary string
	minArgs, maxArgs    int
	// setup registers the command's flags and returns the command bound
	// to them.
	setup func(fs *flag.FlagSet) runner
}

// runner runs a command with its arguments and returns the exit status.
type runner func(e *env, args []string) int

// noFlags is the setup of a command without flags of its own.
func noFlags(r runner) func(*flag.FlagSet) runner {
	return func(*flag.FlagSet) runner { return r }
}

var commands = []*command{
	{name: "topics", summary: "list topics: queues, system or not, stored messages", setup: noFlags(runTopics)},
	{name: "stats", summary: "CommitLog positions, queue offsets, consumer lag, pending transactions", setup: statsCmd},
	{name: "consumers", summary: "consumer groups: members, subscriptions, committed offsets and lag", setup: consumersCmd},
	{name: "get", args: "<msgID>", summary: "print one message by ID", setup: noFlags(runGet), minArgs: 1, maxArgs: 1},
	{name: "trace", args: "<msgID>", summary: "print a message's life (sent, delivered, retried, dead, re-driven) from the message trace",
		setup: noFlags(runTrace), minArgs: 1, maxArgs: 1},
	{name: "query", summary: "find messages of a topic by key (IndexFile), newest first", setup: queryCmd},
	{name: "print", summary: "print messages of a queue from an offset or a time", setup: printCmd},
	{name: "tail", summary: "print the last messages of a queue", setup: tailCmd},
	{name: "verify", summary: "check every CommitLog record and ConsumeQueue entry; exit 1 on damage", setup: noFlags(runVerify)},
	{name: "salvage", args: "<newdir>", summary: "copy every good record into a new store in newdir; list what was dropped; exit 1 if anything was",
		setup: noFlags(runSalvage), minArgs: 1, maxArgs: 1},
	{name: "replication", args: "status [<dir>]", summary: "replication role, epochs, CommitLog end and each replica's lag, from the files (store may run)",
		setup: noFlags(runReplication), minArgs: 1, maxArgs: 2},
	{name: "rebuild-index", summary: "delete the ConsumeQueue and IndexFile and rebuild them from the CommitLog (store not in use)",
		setup: noFlags(runRebuild)},
}

// env is one invocation: the global flags and the output streams.
type env struct {
	stdout, stderr io.Writer
	dir            string
	json           bool
	readOnly       bool
	segmentSize    int64
	cmd            string
}

// run is the whole tool: it parses args (without the program name), runs
// the command and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	gfs := flag.NewFlagSet("mqlite", flag.ContinueOnError)
	gfs.SetOutput(stderr)
	e.globalFlags(gfs)
	gfs.Usage = func() { e.usage(gfs.Output()) }
	if err := gfs.Parse(args); err != nil {
		return helpOrUsage(err)
	}
	rest := gfs.Args()
	if len(rest) == 0 {
		fmt.Fprintln(stderr, "mqlite: no command given")
		e.usage(stderr)
		return exitUsage
	}
	if rest[0] == "help" {
		if len(rest) > 1 {
			rest = []string{rest[1], "-h"}
		} else {
			e.usage(stdout)
			return exitOK
		}
	}
	i := slices.IndexFunc(commands, func(c *command) bool { return c.name == rest[0] })
	if i < 0 {
		fmt.Fprintf(stderr, "mqlite: unknown command %q (commands: %s)\n", rest[0], commandNames())
		return exitUsage
	}
	c := commands[i]
	e.cmd = c.name
	fs := flag.NewFlagSet("mqlite "+c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	e.globalFlags(fs)
	cmdRun := c.setup(fs)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: mqlite -dir DIR [-json] %s\n\n%s.\n\nflags:\n", strings.TrimSpace(c.name+" [flags] "+c.args), capitalize(c.summary))
		fs.PrintDefaults()
	}
	if err := fs.Parse(rest[1:]); err != nil {
		return helpOrUsage(err)
	}
	if n := fs.NArg(); n < c.minArgs || n > c.maxArgs {
		return e.usageErr("want %s, got %d argument(s)", orNone(c.args), n)
	}
	if e.dir == "" && c.name == "replication" && fs.NArg() == 2 {
		e.dir = fs.Arg(1) // mqlite replication status DIR
	}
	if e.dir == "" {
		return e.usageErr("-dir (the store directory) is required")
	}
	return cmdRun(e, fs.Args())
}

// globalFlags registers the flags every command accepts, before or after
// its name.
func (e *env) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&e.dir, "dir", e.dir, "store `directory` (required)")
	fs.BoolVar(&e.json, "json", e.json, "print one JSON document instead of tables")
	fs.BoolVar(&e.readOnly, "readonly", e.readOnly, "open the store read-only (no lock, no change; automatic when another process holds it)")
	fs.Int64Var(&e.segmentSize, "segment-size", e.segmentSize, "CommitLog segment size in `bytes` (default: read from the segment files)")
}

func (e *env) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: mqlite -dir DIR [-json] <command> [flags] [args]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nglobal flags (also accepted after the command):\n")
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	fs.SetOutput(w)
	(&env{}).globalFlags(fs)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\n\"mqlite <command> -h\" describes a command. Exit status: 0 ok, 1 damage or not found, 2 usage or cannot open.\n"+
		"The store is opened with its directory lock (recovering it if its last owner crashed); when another process\n"+
		"holds it, or with -readonly, it is opened read-only instead: a view as of that moment, changing nothing.\n"+
		"rebuild-index writes, so it needs the store stopped and refuses -readonly.\n")
}

// helpOrUsage maps a flag parse error: -h is a success, the rest (already
// printed by package flag with the usage) is a usage error.
func helpOrUsage(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// usageErr prints a usage error naming the command and returns exitUsage.
func (e *env) usageErr(format string, args ...any) int {
	fmt.Fprintf(e.stderr, "mqlite %s: %s (see mqlite %s -h)\n", e.cmd, fmt.Sprintf(format, args...), e.cmd)
	return exitUsage
}

// fail prints "mqlite <command>: <what>: err" and returns code.
func (e *env) fail(code int, what string, err error) int {
	fmt.Fprintf(e.stderr, "mqlite %s: %s: %v\n", e.cmd, what, err)
	return code
}

func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func orNone(s string) string {
	if s == "" {
		return "no arguments"
	}
	return s
}
