package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
	"github.com/spf13/cobra"
)

// outboxListLimit is how many dead letters "rap outbox list" shows.
const outboxListLimit = durable.MaxDeadLetters

func newOutboxCmd(a *app) *cobra.Command {
	var store string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "outbox [list | retry KEY... | drop KEY...] --store FILE [--json]",
		Short: "list, retry or drop the callbacks a tool server stopped delivering (its dead letters)",
		Long: `A tool server built with the rap SDK keeps the callbacks it could not
deliver: those still failing after the maximum retry age
(RetryPolicy.GiveUpAfter, 24 hours by default) and those the runtime
refused with a final 4xx answer. With a rap/durable store they are kept in
its file as dead letters; this command reads and changes that file. It
may run while the tool server runs.

Subcommands:
  list          show the dead letters, oldest first (the default)
  retry KEY...  put dead letters back into the outbox; the running tool
                server delivers them within a second, with a full retry age
  drop KEY...   forget dead letters

URLs are shown redacted: their query strings and long path segments carry
tokens.`,
		Example: `  rap outbox --store data/tools.db
  rap outbox list --store data/tools.db --json
  rap outbox retry --store data/tools.db 4f1c0d2e-...
  rap outbox drop --store data/tools.db 4f1c0d2e-... 9a7b...`,
		ValidArgs: []string{"list", "retry", "drop"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOutbox(cmd.Context(), a, store, asJSON, args)
		},
	}
	cmd.Flags().StringVar(&store, "store", "", "the tool server's rap/durable store `FILE` (ServerOptions.Store)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "list as JSON, one dead letter per line")
	return cmd
}

func runOutbox(ctx context.Context, a *app, storeFlag string, asJSONFlag bool, pos []string) error {
	stdout, stderr, store, asJSON := a.stdout, a.stderr, &storeFlag, &asJSONFlag
	sub := "list"
	if len(pos) > 0 {
		sub, pos = pos[0], pos[1:]
	}
	switch sub {
	case "list":
		if len(pos) != 0 {
			return fmt.Errorf("%w: list takes no arguments, got %q", errUsage, pos)
		}
	case "retry", "drop":
		if len(pos) == 0 {
			return fmt.Errorf("%w: %s needs at least one KEY; list the keys with 'rap outbox list'", errUsage, sub)
		}
	default:
		return fmt.Errorf("%w: unknown subcommand %q; use list, retry or drop", errUsage, sub)
	}
	if *store == "" {
		return fmt.Errorf("%w: --store is required: the tool server's store file", errUsage)
	}
	if _, err := os.Stat(*store); err != nil {
		return fmt.Errorf("store %s: %w; pass the file given to the tool server as its rap/durable store", *store, err)
	}
	st, err := durable.Open(*store)
	if err != nil {
		return err
	}
	defer st.Close()

	switch sub {
	case "retry", "drop":
		failed := 0
		for _, key := range pos {
			var err error
			if sub == "retry" {
				err = st.RetryDeadLetter(ctx, key)
			} else {
				err = st.DropDeadLetter(ctx, key)
			}
			if err != nil {
				failed++
				fmt.Fprintf(stderr, "rap outbox %s %s: %v\n", sub, key, err)
				continue
			}
			verb := "queued again for delivery"
			if sub == "drop" {
				verb = "dropped"
			}
			fmt.Fprintf(stdout, "%s: %s\n", key, verb)
		}
		if failed > 0 {
			return exitError{code: 1}
		}
		return nil
	}
	return listDeadLetters(ctx, st, *asJSON, stdout)
}

// deadLetterJSON is one line of "rap outbox list --json".
type deadLetterJSON struct {
	Key      string    `json:"key"`
	URL      string    `json:"url"` // redacted
	Type     string    `json:"type,omitempty"`
	Bytes    int       `json:"bytes"`
	Attempts int       `json:"attempts"`
	Status   int       `json:"status,omitempty"`
	Created  time.Time `json:"created"`
	DeadAt   time.Time `json:"dead_at"`
	Reason   string    `json:"reason"`
}

func listDeadLetters(ctx context.Context, st *durable.Store, asJSON bool, stdout io.Writer) error {
	dead, err := st.DeadLetters(ctx, outboxListLimit)
	if err != nil {
		return err
	}
	pending, err := st.PendingCount(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, d := range dead {
			var head struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(d.Body, &head)
			if err := enc.Encode(deadLetterJSON{Key: d.Key, URL: rap.RedactURL(d.URL), Type: head.Type, Bytes: len(d.Body),
				Attempts: d.Attempts, Status: d.Status, Created: d.Created.UTC(), DeadAt: d.DeadAt.UTC(), Reason: d.Reason}); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(stdout, "%s pending delivery, %s\n", plural(pending, "callback"), plural(len(dead), "dead letter"))
	if len(dead) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nKEY\tDEAD AT\tSTATUS\tATTEMPTS\tURL\tREASON")
	for _, d := range dead {
		status := "-"
		if d.Status != 0 {
			status = fmt.Sprint(d.Status)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", d.Key, d.DeadAt.UTC().Format(time.RFC3339), status, d.Attempts,
			rap.RedactURL(d.URL), strings.ReplaceAll(d.Reason, "\n", " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(dead) == outboxListLimit {
		fmt.Fprintf(stdout, "(showing the oldest %d)\n", outboxListLimit)
	}
	return nil
}
