package main

// "rap status": the threads of a running runtime waiting longest, over
// the client API (GET /v1/waiting): the way from an alert to the threads
// behind it.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
	"github.com/gorap/gorap/runtime/config"
)

// statusOptions are the flags of rap status.
type statusOptions struct {
	server, token string
	limit         int
	json          bool
}

func newStatusCmd(a *app) *cobra.Command {
	opts := statusOptions{server: "http://" + config.DefaultListen, limit: api.DefaultWaitingLimit}
	cmd := &cobra.Command{
		Use:   "status [flags]",
		Short: "list the threads of a running runtime waiting longest, with what they wait on",
		Long: `Lists the threads of a running runtime ('rap serve') that have waited
longest, oldest first: the threads with a tool call waiting for its tool
server's result, for the user (a choice to answer, a link to authorize) or
for a sleep's timer, and the threads whose last completion failed in the
runtime's process, whose inputs wait for a retry or the next message.

Each line shows the thread's id, its session's title (or the start of its
first message), its own state (as 'GET /v1/threads/{id}' says it, its
children left out), what it waits on (the tool, toolset and call id; the
timer's due time; a retry; an active subscription; a child thread), how
long it has waited, and why its last completion failed: the error when
this process saw it or when the process that scheduled its retry
recorded it, "not known here" when the thread failed for good in another
process or before this one started (its error event and that process's
logs say why). A child thread shows its parent's id; a parent that waits
only on its children is listed after the first of them.

The metrics (GET /metrics, docs/observability.md) count the threads by
state and the calls pending by age, without ids: rap status names them.

--server and --token (RAP_SERVER, RAP_TOKEN) are those of 'rap chat'. A
token bound to a user lists only that user's threads; an admin token,
every user's. --json prints the answer of GET /v1/waiting as it is, for
scripts.

Exit status: 0 when the runtime answered (whether or not a thread waits),
1 when it could not be asked, 2 for bad flags.`,
		Example: `  rap status
  rap status --limit 50 --server http://127.0.0.1:8080
  RAP_TOKEN=s3cret rap status --server https://agent.example
  rap status --json | jq -r '.threads[] | select(.state == "waiting_tools") | .thread_id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.limit < 1 || opts.limit > api.MaxWaitingLimit {
				return usageErrorf("--limit %d: want a number of threads from 1 to %d", opts.limit, api.MaxWaitingLimit)
			}
			return runStatus(cmd.Context(), opts, a.stdout)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.server, "server", opts.server, "runtime `URL`")
	bindEnv(fs, "server", envServer)
	fs.Var((*secretValue)(&opts.token), "token", "bearer `TOKEN` of the runtime's client API")
	bindEnv(fs, "token", config.EnvToken)
	fs.IntVar(&opts.limit, "limit", opts.limit, fmt.Sprintf("list at most `N` threads (1 to %d)", api.MaxWaitingLimit))
	fs.BoolVar(&opts.json, "json", false, "print the runtime's answer as JSON")
	return cmd
}

// runStatus asks the runtime at opts.server for its threads waiting
// longest and prints them to stdout.
func runStatus(ctx context.Context, opts statusOptions, stdout io.Writer) error {
	var copts []client.Option
	if opts.token != "" {
		copts = append(copts, client.WithToken(opts.token))
	}
	c, err := client.New(opts.server, copts...)
	if err != nil {
		return usageErrorf("--server %q: %v", opts.server, err)
	}
	resp, err := c.Waiting(ctx, opts.limit)
	if err != nil {
		return fmt.Errorf("ask %s for its waiting threads: %w", opts.server, err)
	}
	if opts.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(resp)
	}
	printWaiting(stdout, resp)
	return nil
}

// printWaiting writes resp as a table, ages counted to resp.AsOf.
func printWaiting(w io.Writer, resp *api.WaitingResponse) {
	if len(resp.Threads) == 0 {
		fmt.Fprintln(w, "no thread is waiting on a tool, the user, a timer, a retry, a subscription or a child thread")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "THREAD\tSESSION\tSTATE\tWAITING ON\tSINCE\tLAST ERROR")
	for _, t := range resp.Threads {
		title := clip(t.Title, 30)
		if title == "" {
			title = "-"
		}
		lastErr := "-"
		switch {
		case t.LastError != "":
			lastErr = clip(t.LastError, 60)
		case t.LastErrorUnknown:
			lastErr = "not known here"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\t%s\n", t.ThreadID, cell(title), t.State, cell(waitingOn(t, resp.AsOf)),
			age(resp.AsOf.Sub(t.Since)), cell(lastErr))
	}
	tw.Flush()
}

// waitingOn describes what t waits on, times counted to now.
func waitingOn(t api.WaitingThread, now time.Time) string {
	var parts []string
	for _, it := range t.WaitingOn {
		switch it.Kind {
		case api.WaitTool:
			parts = append(parts, fmt.Sprintf("tool %s/%s (call %s)", it.Toolset, it.Tool, it.CallID))
		case api.WaitUser:
			parts = append(parts, fmt.Sprintf("user, for %s/%s (call %s)", it.Toolset, it.Tool, it.CallID))
		case api.WaitTimer:
			parts = append(parts, fmt.Sprintf("timer of %s, %s", it.Tool, dueIn(it.Due, now)))
		case api.WaitSubscription:
			parts = append(parts, fmt.Sprintf("subscription %s (call %s)", it.Tool, it.CallID))
		case api.WaitChildren:
			parts = append(parts, "child thread "+it.ThreadID)
		case api.WaitRetry:
			if it.Due.IsZero() {
				parts = append(parts, "the next message")
			} else {
				parts = append(parts, "a retry, "+dueIn(it.Due, now))
			}
		default:
			parts = append(parts, it.Kind)
		}
	}
	if t.More > 0 {
		parts = append(parts, fmt.Sprintf("%d more", t.More))
	}
	s := strings.Join(parts, "; ")
	if t.ParentID != "" {
		s += " [child of " + t.ParentID + "]"
	}
	return s
}

// dueIn says when due comes, counted from now.
func dueIn(due, now time.Time) string {
	if d := due.Sub(now); d > 0 {
		return "due in " + age(d)
	}
	return "due now"
}

// age writes d the short way: 45s, 12m, 3h05m, 2d04h.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(0, int(d/time.Second)))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// clip cuts s to at most n characters, with "…" when it was cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// cell makes s one table cell: control characters (tabs, line breaks,
// a terminal's escape sequences, which a title could carry) become
// spaces.
func cell(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
