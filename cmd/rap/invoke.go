package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
	"github.com/spf13/cobra"
)

// maxArgsBytes bounds the JSON_ARGS argument.
const maxArgsBytes = 1 << 20

// cancelTimeout bounds the /cancel_tool_call sent when rap invoke stops
// early.
const cancelTimeout = 5 * time.Second

// invokeFlags are the flags of "rap invoke".
type invokeFlags struct {
	wait, timeout               time.Duration
	token, thread, listen, user string
	choose                      int
	inputs                      []string
}

func newInvokeCmd(a *app) *cobra.Command {
	var f invokeFlags
	cmd := &cobra.Command{
		Use:   "invoke [flags] BASE_URL OPERATION [JSON_ARGS]",
		Short: "call one tool of a tool server and print its callbacks as JSON lines",
		Long: `Acts as a one-call RAP runtime: fetches the toolset from BASE_URL, checks
JSON_ARGS (default {}) against OPERATION's input schema (and exits 1 without
calling if they do not fit), sends the invocation with a callback URL served
on a local port, and prints every callback message as one JSON line on
standard output until the tool_result arrives. Progress goes to standard
error.

A tool may ask the user while its call runs. A user_choice is answered
with --choose; without it, on a terminal, the choices are listed and the
pick is read from standard input; otherwise the default is sent, as a
dismissal does. A user_input form (gorap extension, which rap invoke
declares) is listed on standard error and answered with the --input
NAME=VALUE values (fields without one take their default); without
--input, on a terminal, each field is asked for in turn; otherwise the
form is dismissed.

For a subscription (a result with "subscription": true) it keeps printing
events for --wait, or until a final event. When it stops before a final
event (wait over, --timeout, or Ctrl-C) it sends /cancel_tool_call so that
the tool stops too.

Exit status: 0 when a tool_result arrived (also an error result, whose text
starts with "Error: "), or when --wait ended a subscription; 1 when the call
could not be made (discovery failed, invalid arguments, no 200) or no result
came within --timeout; 2 for a usage error; 130 when interrupted.`,
		Example: `  rap invoke http://127.0.0.1:3001 get_time_in_zone '{"timezone":"Asia/Tokyo"}'
  rap invoke --wait 10s http://127.0.0.1:3001 subscribe_clock '{"interval_seconds":1}'
  RAP_TOOL_TOKEN=s3cret rap invoke http://127.0.0.1:3001 run_command '{"command":"ls"}'
  rap invoke --choose 1 http://127.0.0.1:3001 deploy '{"env":"staging"}'
  rap invoke --input city=Paris --input nights=2 http://127.0.0.1:3001 book_hotel`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInvoke(cmd.Context(), a, f, args, os.Stdin, isTerminal(os.Stdin))
		},
	}
	fs := cmd.Flags()
	fs.DurationVar(&f.wait, "wait", 0, "for a subscription: keep printing events this long after the confirming result (0: exit after the result)")
	fs.DurationVar(&f.timeout, "timeout", 0, "give up when the tool_result has not arrived after this long (0: wait until interrupted; the protocol sets no timeout)")
	addToolTokenFlag(fs, &f.token, "bearer `TOKEN` sent to the tool server")
	fs.StringVar(&f.thread, "thread", "", "group_id (thread `ID`) of the call (default: a fresh random id)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:0", "`ADDR` of the callback listener; the tool must be able to reach it")
	fs.IntVar(&f.choose, "choose", -1, "answer a user_choice with this `INDEX` (-1: ask on a terminal, else send the tool's default, as a dismissal does)")
	fs.StringArrayVar(&f.inputs, "input", nil, "answer a user_input form's field with `NAME=VALUE` (repeatable; fields without one take their default; none given: ask on a terminal, else dismiss)")
	fs.StringVar(&f.user, "user", "", "user_id of the call (default: none)")
	return cmd
}

// runInvoke runs rap invoke; in is standard input, where questions are
// answered when terminal is true.
func runInvoke(ctx context.Context, a *app, f invokeFlags, pos []string, in io.Reader, terminal bool) error {
	stdout, stderr := a.stdout, a.stderr
	wait, timeout, token, thread, listen, choose, userID := &f.wait, &f.timeout, &f.token, &f.thread, &f.listen, &f.choose, &f.user
	if len(pos) < 2 || len(pos) > 3 {
		return fmt.Errorf("%w: want BASE_URL OPERATION [JSON_ARGS], got %d arguments", errUsage, len(pos))
	}
	base, op := pos[0], pos[1]
	if !isURL(base) {
		return fmt.Errorf("%w: BASE_URL %q must start with http:// or https://", errUsage, base)
	}
	rawArgs := json.RawMessage(`{}`)
	if len(pos) == 3 {
		if len(pos[2]) > maxArgsBytes {
			return fmt.Errorf("%w: JSON_ARGS is over %d bytes", errUsage, maxArgsBytes)
		}
		rawArgs = json.RawMessage(strings.TrimSpace(pos[2]))
		if !json.Valid(rawArgs) || !strings.HasPrefix(string(rawArgs), "{") {
			return fmt.Errorf("%w: JSON_ARGS must be a JSON object such as '{\"timezone\":\"UTC\"}'; quote it for the shell", errUsage)
		}
	}
	if *wait < 0 || *timeout < 0 {
		return fmt.Errorf("%w: --wait and --timeout must not be negative", errUsage)
	}
	inputs, err := parseInputFlags(f.inputs)
	if err != nil {
		return err
	}

	opts := []raptest.Option{raptest.WithAddr(*listen)}
	if *token != "" {
		opts = append(opts, raptest.WithBearerToken(*token))
	}
	if *thread != "" {
		opts = append(opts, raptest.WithDefaultThread(*thread))
	}
	rt, err := raptest.Start(opts...)
	if err != nil {
		return err
	}
	defer rt.Close()

	ts, err := rt.Discover(ctx, base)
	if err != nil {
		return withoutLibraryPrefix(err)
	}
	fmt.Fprintf(stderr, "rap invoke: toolset %q at %s: %s\n", ts.Name, ts.Endpoint, plural(len(ts.Tools), "tool"))
	cat, _ := rap.NewCatalog([]*rap.Toolset{ts}) // Discover already validated it
	tool, ok := cat.Lookup(op)
	if !ok {
		names := make([]string, len(ts.Tools))
		for i, t := range ts.Tools {
			names[i] = t.Name
		}
		return fmt.Errorf("toolset %q has no tool %q; its tools are: %s", ts.Name, op, strings.Join(names, ", "))
	}
	// RAP IN-2: check the arguments before sending them.
	if err := tool.ValidateArguments(rawArgs); err != nil {
		var ae *rap.ArgumentsError
		if errors.As(err, &ae) {
			fmt.Fprintf(stderr, "rap invoke: the arguments do not fit %s's input schema; nothing was sent:\n", op)
			for _, p := range ae.Problems {
				fmt.Fprintf(stderr, "  %s\n", p)
			}
			fmt.Fprintf(stderr, "input schema: %s\n", tool.Tool.InputSchema)
			return exitError{1}
		}
		return err
	}

	// rap invoke answers user_input forms (gorap extension).
	invOpts := []raptest.InvokeOption{raptest.WithExtensions(rap.ExtensionUserInput)}
	if *userID != "" {
		invOpts = append(invOpts, raptest.WithUserID(*userID))
	}
	call, err := rt.Invoke(ctx, base, op, rawArgs, invOpts...)
	if err != nil {
		return withoutLibraryPrefix(err)
	}
	fmt.Fprintf(stderr, "rap invoke: sent %s (id %s, thread %s); waiting for callbacks\n", op, call.Invocation.ID, call.Invocation.GroupID)
	ask := &asker{rt: rt, choose: *choose, inputs: inputs, in: bufio.NewReader(in), terminal: terminal, stderr: stderr}
	return followCall(ctx, call, *wait, *timeout, ask, stdout, stderr)
}

// followCall prints the call's callbacks until the result (and, for a
// subscription, until the wait is over or a final event).
func followCall(ctx context.Context, call *raptest.Call, wait, timeout time.Duration, ask *asker, stdout, stderr io.Writer) error {
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	waitCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	subscribed := false
	for {
		msg, err := call.Next(waitCtx)
		if err != nil {
			return stopCall(ctx, call, subscribed, stderr)
		}
		if err := enc.Encode(msg); err != nil {
			return fmt.Errorf("writing to standard output: %w", err)
		}
		switch m := msg.(type) {
		case *rap.ToolResult:
			if !m.Subscription {
				return nil
			}
			subscribed = true
			if wait == 0 {
				fmt.Fprintln(stderr, "rap invoke: subscribed; --wait is 0, so cancelling the subscription and exiting")
				return cancelSubscription(call, stderr)
			}
			fmt.Fprintf(stderr, "rap invoke: subscribed; printing events for %v\n", wait)
			var cancel context.CancelFunc
			waitCtx, cancel = context.WithTimeout(ctx, wait)
			defer cancel()
		case *rap.SubscriptionEvent:
			if m.Final {
				fmt.Fprintln(stderr, "rap invoke: final event; the subscription ended")
				return nil
			}
		case *rap.OAuth:
			fmt.Fprintf(stderr, "rap invoke: the tool asks for authorization; open %s, then the result will follow\n", m.AuthURL)
		case *rap.UserChoice:
			ask.answerChoice(ctx, m)
		case *rap.UserInput:
			ask.answerInput(ctx, m)
		}
	}
}

// stopCall handles the end of waiting: a finished wait for a subscription
// is a normal exit; an interrupt or a timeout cancels the call.
func stopCall(ctx context.Context, call *raptest.Call, subscribed bool, stderr io.Writer) error {
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "rap invoke: interrupted; sending /cancel_tool_call")
		cancelSubscription(call, stderr) //nolint:errcheck // reported inside
		return exitError{130}
	}
	if subscribed {
		fmt.Fprintln(stderr, "rap invoke: --wait is over; cancelling the subscription")
		return cancelSubscription(call, stderr)
	}
	fmt.Fprintln(stderr, "rap invoke: --timeout passed without a tool_result; sending /cancel_tool_call")
	cancelSubscription(call, stderr) //nolint:errcheck // reported inside
	return errors.New("no tool_result within --timeout; raise --timeout or check the tool server's logs")
}

// cancelSubscription sends /cancel_tool_call for the call (RAP CA-1).
func cancelSubscription(call *raptest.Call, stderr io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	if err := call.Cancel(ctx); err != nil {
		fmt.Fprintf(stderr, "rap invoke: /cancel_tool_call failed: %v\n", err)
	}
	return nil
}

// withoutLibraryPrefix drops the "raptest: " that the library puts before
// its errors: the user ran rap invoke, not raptest, and the rest of the
// message says what went wrong and what to do.
func withoutLibraryPrefix(err error) error {
	if msg, ok := strings.CutPrefix(err.Error(), "raptest: "); ok {
		return errors.New(msg)
	}
	return err
}
