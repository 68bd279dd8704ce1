package main

// "rap delete": deletes sessions from a running runtime, by id or all of a
// user's, over the client API.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
	"github.com/gorap/gorap/runtime/config"
)

// deleteOptions are the flags of rap delete.
type deleteOptions struct {
	server, token, user string
	yes                 bool
}

func newDeleteCmd(a *app) *cobra.Command {
	opts := deleteOptions{server: "http://" + config.DefaultListen}
	cmd := &cobra.Command{
		Use:   "delete (SESSION... | --user USER_ID) [flags]",
		Short: "delete sessions (a root thread and all its child threads) from a running runtime",
		Long: `Deletes sessions from a running runtime ('rap serve'): each session is a
root thread and all of its child threads. The runtime first closes what is
still open (pending tool calls are cancelled, subscriptions end, every tool
server is told with /close_thread), then removes the threads with their
history, calls, timers and views, for good. A SESSION is the id of a root
thread ('rap chat --tree' lists them); the id of a child thread is refused
with the id of its session. With --user, every session of that user is
deleted.

Deleting cannot be undone. To keep a copy, export the session first:
rap export SESSION -o FILE.

Before deleting, rap delete asks for confirmation when standard input is a
terminal; --yes skips the question. When standard input is not a terminal
(a script, a pipe) it deletes nothing without --yes.

--server and --token (RAP_SERVER, RAP_TOKEN) are those of 'rap chat'. A
token bound to a user deletes only that user's sessions; an admin token,
any.

Prints each deleted session, then how many. Exit status: 0 when every
session was deleted; 1 when one could not be (unknown, being moved to
another runtime, refused) or the question was answered no; 2 for bad flags
or arguments.`,
		Example: `  rap delete 01JD7K3M9Q2W5E8R1T4Y6U0I3O
  rap delete --yes 01JD7K3M9Q2W5E8R1T4Y6U0I3O 01JD7K4N0R3X6F9S2U5Z7V1J4P
  rap delete --user alice --server http://127.0.0.1:8080
  RAP_TOKEN=s3cret rap delete --user alice --yes --server https://agent.example
  rap export 01JD7K3M9Q2W5E8R1T4Y6U0I3O -o session.json && rap delete --yes 01JD7K3M9Q2W5E8R1T4Y6U0I3O`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 0) == (opts.user == "") {
				return usageErrorf("name the sessions to delete (rap delete SESSION...) or a user (rap delete --user USER_ID), not both")
			}
			in, terminal := os.Stdin, isTerminal(os.Stdin)
			return runDelete(cmd.Context(), opts, args, in, terminal, a.stdout, a.stderr)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.server, "server", opts.server, "runtime `URL`")
	bindEnv(fs, "server", envServer)
	fs.Var((*secretValue)(&opts.token), "token", "bearer `TOKEN` of the runtime's client API")
	bindEnv(fs, "token", config.EnvToken)
	fs.StringVar(&opts.user, "user", "", "delete every session of the user `USER_ID`")
	fs.BoolVar(&opts.yes, "yes", false, "delete without asking for confirmation (needed when standard input is not a terminal)")
	return cmd
}

// runDelete deletes the sessions ids, or every session of opts.user, from
// the runtime at opts.server. in is standard input, where the
// confirmation is read when terminal is true.
func runDelete(ctx context.Context, opts deleteOptions, ids []string, in io.Reader, terminal bool, stdout, stderr io.Writer) error {
	var copts []client.Option
	if opts.token != "" {
		copts = append(copts, client.WithToken(opts.token))
	}
	c, err := client.New(opts.server, copts...)
	if err != nil {
		return usageErrorf("--server %q: %v", opts.server, err)
	}
	what := plural(len(ids), "session")
	if opts.user != "" {
		if ids, err = userSessions(ctx, c, opts.user); err != nil {
			return err
		}
		if len(ids) == 0 {
			fmt.Fprintf(stdout, "user %q has no sessions at %s: nothing to delete\n", opts.user, opts.server)
			return nil
		}
		what = fmt.Sprintf("the %s of user %q", plural(len(ids), "session"), opts.user)
	}
	if !opts.yes {
		if !terminal {
			return usageErrorf("deleting %s cannot be undone, and standard input is not a terminal to confirm it: pass --yes to delete (and first 'rap export SESSION -o FILE' to keep a copy)", what)
		}
		prompt := fmt.Sprintf("Delete %s at %s: %s?\nThis cannot be undone ('rap export SESSION -o FILE' keeps a copy). Type yes to delete: ", what, opts.server, strings.Join(ids, ", "))
		if !confirm(in, stderr, prompt) {
			fmt.Fprintln(stderr, "rap delete: nothing deleted")
			return exitError{code: exitFailure}
		}
	}
	sessions, threads, failed := 0, 0, 0
	for _, id := range ids {
		n, err := c.DeleteSession(ctx, id)
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "rap delete: session %s: %s\n", id, explainDeleteError(err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		sessions++
		threads += n
		fmt.Fprintf(stdout, "deleted session %s (%s)\n", id, plural(n, "thread"))
	}
	fmt.Fprintf(stdout, "deleted %s, %s\n", plural(sessions, "session"), plural(threads, "thread"))
	if failed > 0 {
		fmt.Fprintf(stderr, "rap delete: %s not deleted\n", plural(failed, "session"))
		return exitError{code: exitFailure}
	}
	return nil
}

// userSessions returns the ids of the root threads of user's sessions,
// archived ones included, oldest first, reading the runtime's thread list
// page after page.
func userSessions(ctx context.Context, c *client.Client, user string) ([]string, error) {
	var ids []string
	for th, err := range c.Threads(ctx, client.ListOptions{UserID: user, Limit: 1000, Archived: api.ArchivedInclude}) {
		if err != nil {
			return nil, fmt.Errorf("list the sessions of user %q: %w", user, err)
		}
		if th.ParentID == "" {
			ids = append(ids, th.ID)
		}
	}
	return ids, nil
}

// confirm writes prompt to out and reports whether the line read from in
// is yes (or y, in any case).
func confirm(in io.Reader, out io.Writer, prompt string) bool {
	fmt.Fprint(out, prompt)
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(out)
		return false
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	return false
}

// explainDeleteError says why a session was not deleted, and what to do.
func explainDeleteError(err error) string {
	switch {
	case errors.Is(err, client.ErrNotFound):
		return "no such session (it was deleted already, the id is wrong, or the token's user does not own it); list the sessions with 'rap chat --tree'"
	case errors.Is(err, client.ErrConflict):
		return err.Error() + "; try again once the move has ended"
	}
	return err.Error()
}
