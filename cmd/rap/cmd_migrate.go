package main

// "rap migrate": move a session to another runtime (docs/migration.md).

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
	"github.com/gorap/gorap/runtime/config"
)

// envToToken is the environment variable of rap migrate's --to-token.
const envToToken = "RAP_TO_TOKEN"

func newMigrateCmd(a *app) *cobra.Command {
	var server, token, to, toToken string
	cmd := &cobra.Command{
		Use:   "migrate SESSION --to URL|REMOTE",
		Short: "move a session to another runtime, with its pending calls, timers and tool state",
		Long: `Moves a session (a root thread and its child threads) from the runtime at
--server to another gorap runtime, keeping its thread ids: histories,
pending tool calls, active subscriptions, sleeps and other timers, open
user choices and views all move. Tool servers whose toolset says
needsMigration are asked to move the session's state to the destination's
server of the same toolset (POST /migrate) first.

It is all or nothing: if a tool server, the network or the destination
fails before the destination has the session, the session stays here as it
was, with whatever arrived meanwhile. Afterwards this runtime forwards the
results tools still send to the old address, and answers for the session
with its new address.

--to is the destination's base URL, or the name of one of the remotes in
the runtime's rap.json ("remotes": {"NAME": {"url": "…", "token_env": "…"}}),
whose token the runtime reads from its own environment. --to-token
(RAP_TO_TOKEN) is the destination's client token when --to is a URL.
--token (RAP_TOKEN) is this runtime's.`,
		Example: `  rap migrate 01JD7... --to https://agents.example --to-token "$SERVER_TOKEN"
  rap migrate 01JD7... --to office --server http://127.0.0.1:8080
  RAP_TO_TOKEN=s3cret rap migrate 01JD7... --to http://10.0.0.5:8080`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("name the session to move (its root thread id, as rap chat --tree lists it)")
			}
			if strings.TrimSpace(to) == "" {
				return usageErrorf("say where to move the session: --to URL, or --to NAME of a remote in the runtime's rap.json")
			}
			return runMigrate(cmd.Context(), a, server, token, args[0], api.MoveRequest{To: to, Token: toToken})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&server, "server", "http://"+config.DefaultListen, "the `URL` of the runtime the session is on now")
	bindEnv(fs, "server", envServer)
	fs.Var((*secretValue)(&token), "token", "bearer `TOKEN` of that runtime's client API (env "+config.EnvToken+")")
	bindEnv(fs, "token", config.EnvToken)
	fs.StringVar(&to, "to", "", "the destination runtime's base `URL`, or the name of a remote configured at the runtime")
	fs.Var((*secretValue)(&toToken), "to-token", "the destination's client `TOKEN` (prefer the environment variable: flags show in ps)")
	bindEnv(fs, "to-token", envToToken)
	return cmd
}

func runMigrate(ctx context.Context, a *app, server, token, session string, req api.MoveRequest) error {
	c, err := client.New(server, client.WithToken(token))
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "moving session %s to %s… (this waits for the tool servers that keep state for it)\n", session, req.To)
	start := time.Now()
	resp, err := c.MoveSession(ctx, session, req)
	if err != nil {
		if to, moved := client.MovedTo(err); moved {
			return fmt.Errorf("session %s moved already: it is at %s", session, to)
		}
		return err
	}
	fmt.Fprintf(a.stdout, "moved session %s to %s (%s", resp.Session, resp.MovedTo, plural(resp.Threads, "thread"))
	if len(resp.Migrated) > 0 {
		fmt.Fprintf(a.stdout, "; tool state moved by %s", strings.Join(resp.Migrated, ", "))
	}
	fmt.Fprintf(a.stdout, ") in %v\n", time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(a.stdout, "continue there: rap chat --server %s --thread %s\n", resp.MovedTo, resp.Session)
	return nil
}
