package main

// "rap chat": the flags; the terminal client is termchat.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/gorap/gorap/runtime/config"
	"github.com/gorap/gorap/termchat"
)

// envServer is the environment variable of rap chat's --server.
const envServer = "RAP_SERVER"

func newChatCmd(a *app) *cobra.Command {
	opts := termchat.Options{Server: "http://" + config.DefaultListen}
	cmd := &cobra.Command{
		Use:   "chat [flags]",
		Short: "talk to a running runtime ('rap serve') in the terminal",
		Long: `Talks to a running runtime ('rap serve') in the terminal: each line you type
is a message to the thread; replies, tool calls and their results are
printed as they happen, in the order they happened (a tool's result before
the reply it caused). In a terminal, lines are edited with the arrow keys
and kept in a history (up/down, Ctrl-R); Ctrl-C stops waiting for the turn
that runs, and Ctrl-C again (or at the prompt) exits. With standard input
from a file or a pipe it sends each line and, at the end of the input,
waits (up to --wait) until the thread and its child threads are quiet: no
queued input, no pending tool call, no active subscription, no child thread
still running or reporting.

A line starting with / is a command, not a message:
  /threads                        the thread tree of this session
  /usage                          the tokens this thread used, and those of
                                  its whole session (the root thread and
                                  every child thread), as the model's
                                  provider reported them: input (cached
                                  and written to the cache apart) and
                                  output; then the budget of each of the
                                  session's tools that has one, with what
                                  it spent ("over budget" once spent)
  /compact                        have the model summarise this thread's
                                  older messages now: from then on it
                                  reads the summary instead of them (its
                                  last messages stay whole); every message
                                  is kept. Prints "· compacted N earlier
                                  messages (the model sees a summary): …",
                                  or why there is nothing to compact yet
  /move URL_OR_REMOTE [TOKEN]     move this session to another gorap runtime:
                                  its URL, or the name of a remote this
                                  runtime knows; TOKEN is that runtime's
                                  client token, needed unless this runtime
                                  knows it. Once the session is there the
                                  chat prints the command that continues it
                                  there and exits 0; when the move fails the
                                  session stays here and the chat goes on.
                                  A TOKEN typed at the prompt is not kept in
                                  the line history.
  /dismiss                        decline the form a tool asks you to fill
                                  in (a user input)
  /help, /quit
A line starting with // is sent as a message with one / less.

When a tool asks you to fill in a form (a user input, a gorap extension),
the chat asks its fields one by one, each on a line of its own (piped, each
input line answers the next field): an empty line leaves an optional field
empty, y or n answers a yes/no field, an option's number picks it. A value
that does not fit is refused and the field asked again.

Where the runtime compacted the thread (near the model's context window,
or after /compact), the transcript shows "· compacted N earlier messages
(the model sees a summary): " and the summary's first line: in a resumed
thread's history right after the last message the summary covers, and as
it happens.

--status prints when the thread starts and stops running, and under each
turn the tokens its completion used ("· tokens: 12,345 in (10,000 cached),
1,234 out"); without it a turn prints nothing of the kind.

--token is the runtime's client token (RAP_TOKEN), the one 'rap serve'
requires when it has one.

Exit status: 0 when the conversation ended normally or the session moved
with /move; 1 when the runtime refused a request (a wrong token, a message
it would not take), reported a failure, a /move failed, the event stream
broke, --wait expired before the thread was quiet, or the session moved to
another runtime (the chat then says where, and the command that continues
it there); 2 for bad flags.`,
		Example: `  rap chat
  rap chat --server http://127.0.0.1:8080 --thread 01JD7...
  echo "What time is it in Tokyo?" | rap chat --wait 1m
  RAP_TOKEN=s3cret rap chat --server https://agent.example
  echo "/move https://b.example" | rap chat --thread 01JD7...
  printf 'Summarise the report\n/usage\n' | rap chat --status
  echo /compact | rap chat --thread 01JD7...
  rap chat --tree`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runChat(cmd.Context(), opts, a.stdout, a.stderr)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.Server, "server", opts.Server, "runtime `URL`")
	bindEnv(fs, "server", envServer)
	fs.StringVar(&opts.Thread, "thread", "", "resume thread `ID` (its history is printed first); default: a new thread")
	fs.DurationVar(&opts.Wait, "wait", 2*time.Minute, "how long to wait, after each message and at the end of input, for the thread and its children to be quiet (no queued input, pending call, active subscription or running child)")
	fs.BoolVar(&opts.ShowStatus, "status", false, "show running/idle changes and the tokens of each completion")
	fs.BoolVar(&opts.Tree, "tree", false, "print the thread tree (every session, or the session of --thread) and exit")
	fs.Var((*secretValue)(&opts.Token), "token", "bearer `TOKEN` of the runtime's client API")
	bindEnv(fs, "token", config.EnvToken)
	return cmd
}

// runChat runs the terminal client: interactive (line editing, Ctrl-C
// handling) when stdin and stdout are terminals, piped otherwise.
func runChat(ctx context.Context, opts termchat.Options, stdout, stderr io.Writer) error {
	opts.Stdout, opts.Stderr, opts.In = stdout, stderr, os.Stdin
	opts.Display = termchat.DetectDisplay(os.Getenv, isTerminal(os.Stdout))
	if !opts.Tree && isTerminal(os.Stdin) && isTerminal(os.Stdout) {
		// Interactive: line editing and history; Ctrl-C interrupts a turn
		// and a second one exits, so SIGINT no longer cancels ctx.
		ed := termchat.NewLineEditor(termchat.DefaultHistoryFile())
		defer ed.Close()
		opts.Lines = ed
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt)
		defer signal.Stop(sigs)
		ints := make(chan struct{}, 1)
		go func() {
			for range sigs {
				select {
				case ints <- struct{}{}:
				default:
				}
			}
		}()
		opts.Interrupts = ints
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(context.WithoutCancel(ctx), syscall.SIGTERM)
		defer stop()
	}
	return exitStatus(termchat.Run(ctx, opts), stderr, "chat")
}

// exitStatus turns an error of the terminal client into the verb's exit
// status: the message is printed here, and an exitError carries the code.
func exitStatus(err error, stderr io.Writer, verb string) error {
	if err == nil {
		return nil
	}
	code := termchat.ExitCode(err)
	if code == termchat.ExitUsage {
		return usageErrorf("%v", err)
	}
	fmt.Fprintf(stderr, "rap %s: %v\n", verb, err)
	return exitError{code: code}
}

// isTerminal reports whether f is a terminal (not a file, a pipe or
// /dev/null, which is a character device too).
func isTerminal(f *os.File) bool {
	fd := f.Fd()
	return isatty.IsTerminal(fd) || isatty.IsCygwinTerminal(fd)
}
