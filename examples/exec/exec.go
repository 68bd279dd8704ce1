// Package exec is an example RAP tool server with one tool, run_command,
// that runs a program and streams its output.
//
// # Danger
//
// run_command runs any program the caller names, with the rights of the
// server's user. Whoever can reach the server can run code on the machine.
// Serve it only on a loopback address or behind authentication: set
// rap.ServerOptions.BearerToken so that only your runtime may invoke it, and
// never expose it to a network you do not control. "rap example exec" binds
// to 127.0.0.1 and prints a warning for this reason.
//
// Programs run without a shell (no pipes, globbing or variable expansion)
// and with a small environment (PATH, HOME, LANG, TMPDIR and TERM=dumb), so
// that the server's secrets do not reach the model through "env". Each
// program runs in its own process group; a timeout or a /cancel_tool_call
// kills the whole group, and so does the program's exit: background
// processes it leaves behind do not outlive it.
//
// run_command is a subscription (RAP SU-1): it is confirmed once the
// program has started (rap.ConfirmInHandler), so a program that cannot
// start gets an ordinary "Error: " result; then every output line arrives as an associative event
// {"stream":"stdout"|"stderr","line":"..."}, and a final associative event
// reports how the program ended:
// {"exit_code":0,"lines":12,"dropped":0,"duration_ms":31}.
package exec

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/rap"
)

// Name is the toolset's name in its manifest.
const Name = "exec"

// Default limits.
const (
	// DefaultTimeout is how long a program may run when the call does not
	// say.
	DefaultTimeout = 10 * time.Minute
	// MaxTimeoutSeconds is the largest timeout_seconds accepted (one day).
	MaxTimeoutSeconds = 86400
	// DefaultMaxLines is how many output lines are sent as events; later
	// lines are counted as dropped.
	DefaultMaxLines = 1000
	// DefaultMaxLineBytes is the longest line sent; longer lines are cut
	// and marked with TruncatedMark.
	DefaultMaxLineBytes = 4096
	// maxArgs bounds the number of program arguments.
	maxArgs = 256
	// maxArgBytes bounds one argument.
	maxArgBytes = 8192
)

// TruncatedMark ends a line that was cut at the line length limit.
const TruncatedMark = " …[truncated]"

// Limits bound what one run_command call may send back.
type Limits struct {
	// MaxLines is how many output lines become events; zero means
	// DefaultMaxLines.
	MaxLines int
	// MaxLineBytes is the longest line sent; zero means
	// DefaultMaxLineBytes.
	MaxLineBytes int
}

// Command is the input of run_command.
type Command struct {
	// Argv is the program and its arguments, from "command" (a string or
	// an array of strings) followed by "args".
	Argv []string
	// Dir is the working directory; empty means the server's.
	Dir string
	// Timeout bounds the run.
	Timeout time.Duration
}

// UnmarshalJSON decodes and checks run_command's arguments, so that a bad
// command, directory or timeout is answered with an error result before
// anything starts (RAP IN-5).
func (c *Command) UnmarshalJSON(data []byte) error {
	var in struct {
		Command        json.RawMessage `json:"command"`
		Args           []string        `json:"args"`
		Dir            string          `json:"dir"`
		TimeoutSeconds float64         `json:"timeout_seconds"`
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	var argv []string
	var one string
	if err := json.Unmarshal(in.Command, &one); err == nil {
		argv = []string{one}
	} else if err := json.Unmarshal(in.Command, &argv); err != nil {
		return errors.New(`"command" must be a program name or an array such as ["ls", "-l"]`)
	}
	argv = append(argv, in.Args...)
	if len(argv) == 0 || argv[0] == "" {
		return errors.New(`"command" is empty; name the program to run, such as "ls"`)
	}
	if len(argv) > maxArgs {
		return fmt.Errorf("%d arguments is over the limit of %d", len(argv), maxArgs)
	}
	for i, a := range argv {
		if len(a) > maxArgBytes || strings.ContainsRune(a, 0) {
			return fmt.Errorf("argument %d is over %d bytes or contains a NUL byte", i, maxArgBytes)
		}
	}
	if _, err := osexec.LookPath(argv[0]); err != nil {
		hint := ""
		if strings.ContainsAny(argv[0], " \t") && len(in.Args) == 0 {
			hint = `; programs run without a shell, so give the program and its arguments separately, as in ["ls", "-l"]`
		}
		return fmt.Errorf("program %q not found or not executable%s", argv[0], hint)
	}
	if in.Dir != "" {
		fi, err := os.Stat(in.Dir)
		if err != nil || !fi.IsDir() {
			return fmt.Errorf(`"dir" %q is not an existing directory; give the path of one, or omit dir`, in.Dir)
		}
	}
	switch {
	case in.TimeoutSeconds == 0:
		c.Timeout = DefaultTimeout
	case in.TimeoutSeconds < 0 || in.TimeoutSeconds > MaxTimeoutSeconds:
		return fmt.Errorf(`"timeout_seconds" %v is out of range; give 0.1 to %d`, in.TimeoutSeconds, MaxTimeoutSeconds)
	default:
		c.Timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
	}
	c.Argv, c.Dir = argv, in.Dir
	return nil
}

// Line is the JSON text of one output event.
type Line struct {
	// Stream is "stdout" or "stderr".
	Stream string `json:"stream"`
	// Line is the text of the line without its newline.
	Line string `json:"line"`
}

// Exit is the JSON text of the final event.
type Exit struct {
	// ExitCode is the program's exit status; -1 when it was killed or did
	// not start.
	ExitCode int `json:"exit_code"`
	// TimedOut is true when the timeout killed the program.
	TimedOut bool `json:"timed_out,omitempty"`
	// Error describes a failure to run or wait for the program.
	Error string `json:"error,omitempty"`
	// Lines is the number of output lines sent as events.
	Lines int `json:"lines"`
	// Dropped is the number of output lines over the line limit.
	Dropped int `json:"dropped"`
	// DurationMS is the run time in milliseconds.
	DurationMS int64 `json:"duration_ms"`
}

var commandSchema = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "command": {
      "description": "The program to run, or an array of the program and its arguments. No shell is used.",
      "oneOf": [
        {"type": "string", "minLength": 1},
        {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": %[1]d}
      ]
    },
    "args": {"type": "array", "items": {"type": "string"}, "maxItems": %[1]d, "description": "Arguments appended to command."},
    "dir": {"type": "string", "maxLength": 4096, "description": "Working directory; defaults to the server's."},
    "timeout_seconds": {"type": "number", "minimum": 0.1, "maximum": %[2]d, "description": "Kill the program after this many seconds; default 600."}
  },
  "required": ["command"],
  "additionalProperties": false
}`, maxArgs, MaxTimeoutSeconds))

// New returns the exec tool server with the default limits. Read the
// package documentation about its danger before serving it. Call Start on
// it before serving.
func New(opts *rap.ServerOptions) *rap.Server {
	return NewWithLimits(opts, Limits{})
}

// NewWithLimits is New with explicit output limits.
func NewWithLimits(opts *rap.ServerOptions, lim Limits) *rap.Server {
	if lim.MaxLines <= 0 {
		lim.MaxLines = DefaultMaxLines
	}
	if lim.MaxLineBytes <= 0 {
		lim.MaxLineBytes = DefaultMaxLineBytes
	}
	o := rap.ServerOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Description == "" {
		o.Description = "Runs programs on the tool server's machine and streams their output."
	}
	if o.BearerToken == "" {
		log := o.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("exec: run_command is served without a bearer token: anyone who can reach this server can run programs as this user; set rap.ServerOptions.BearerToken")
	}
	s := rap.NewServer(Name, &o)
	rap.AddSubscription(s, &rap.Tool{
		Name: "run_command",
		Description: "Runs a program without a shell and streams its output: one associative event per line " +
			`{"stream":"stdout"|"stderr","line":...}, then a final event {"exit_code":...,"lines":...,"dropped":...}. ` +
			fmt.Sprintf("At most %d lines of %d bytes are sent. Cancel the call to kill the program.", lim.MaxLines, lim.MaxLineBytes),
		InputSchema: commandSchema,
		Annotations: &rap.Annotations{Destructive: true, LongRunning: true},
		DisplayScript: `let s = "$";
let words = [];
if type_of(args.command) == "array" { words = args.command; } else { words.push(args.command); }
if args.args != () { words.append(args.args); }
for w in words { s += " " + w; }
s`,
	}, func(ctx context.Context, sub *rap.Subscription, c Command) error {
		return run(ctx, sub, c, lim)
	}, rap.ConfirmInHandler())
	return s
}

// environment is the small environment programs run with.
func environment() []string {
	env := []string{"TERM=dumb"}
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// run starts the program and streams its output until it ends.
func run(ctx context.Context, sub *rap.Subscription, c Command, lim Limits) error {
	if sub.Resumed() {
		// The program died with the previous server process: say so.
		return sub.Final(ctx, mustJSON(Exit{ExitCode: -1, Error: "the tool server restarted while the program ran; its outcome is unknown. Run it again if needed."}), true)
	}
	runCtx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	cmd := osexec.CommandContext(runCtx, c.Argv[0], c.Argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = environment()
	setProcessGroup(cmd)
	// The program writes into pipes of our own, so that Wait returns when
	// it exits even if a child it left behind still holds them.
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	start := time.Now()
	err = cmd.Start()
	outW.Close() // the child holds its own copies
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		// Not confirmed yet: the call ends in an error result (RAP RE-4).
		return fmt.Errorf("Error: could not start %s: %v. Check the program name (it must be on the server's PATH or an absolute path) and dir, then call again.", filepath.Base(c.Argv[0]), err)
	}
	// The program runs: confirm the subscription (RAP SU-1) before its
	// first output line is sent.
	if err := sub.Confirm(ctx); err != nil {
		killGroup(cmd)
		_ = cmd.Wait()
		outR.Close()
		errR.Close()
		return err
	}
	var werr error
	exited := make(chan struct{})
	go func() {
		werr = cmd.Wait()
		// Children left running in the background die with the program,
		// which also closes the pipes they hold.
		killGroup(cmd)
		close(exited)
	}()

	lines := make(chan Line, 64)
	var readers sync.WaitGroup
	for _, p := range []struct {
		name string
		r    *os.File
	}{{"stdout", outR}, {"stderr", errR}} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer p.r.Close()
			readLines(p.r, p.name, lim.MaxLineBytes, lines)
		}()
	}
	go func() { readers.Wait(); close(lines) }()

	var ex Exit
	emitting := true
	for l := range lines {
		if !emitting || ex.Lines >= lim.MaxLines {
			ex.Dropped++
			continue
		}
		if err := sub.EmitAssociative(ctx, mustJSON(l)); err != nil {
			emitting = false // cancelled: keep draining so the program is not blocked
			continue
		}
		ex.Lines++
	}
	<-exited
	ex.DurationMS = time.Since(start).Milliseconds()
	if ctx.Err() != nil {
		// Cancelled by the runtime or the thread closed: send nothing more
		// (RAP SU-4, CA-2).
		return context.Cause(ctx)
	}
	ex.ExitCode = -1
	if cmd.ProcessState != nil {
		ex.ExitCode = cmd.ProcessState.ExitCode()
	}
	var exitErr *osexec.ExitError
	switch {
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		ex.TimedOut = true
		ex.Error = fmt.Sprintf("killed after the %v timeout; raise timeout_seconds if it needs longer", c.Timeout)
	case werr != nil && !errors.As(werr, &exitErr):
		ex.Error = werr.Error()
	}
	return sub.Final(ctx, mustJSON(ex), true)
}

// readLines sends each line of r, cut at maxBytes, to out.
func readLines(r io.Reader, stream string, maxBytes int, out chan<- Line) {
	br := bufio.NewReaderSize(r, maxBytes)
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(chunk) > 0 || (err == nil && !isPrefix) {
			text := strings.ToValidUTF8(string(chunk), "\uFFFD")
			if isPrefix {
				text += TruncatedMark
				// Skip the rest of the long line.
				for isPrefix && err == nil {
					_, isPrefix, err = br.ReadLine()
				}
			}
			out <- Line{Stream: stream, Line: text}
		}
		if err != nil {
			return
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are marshalled here
	}
	return string(b)
}
