package main

// "rap demo": the registration only; the demo is demo.go.

import (
	"log/slog"
	"time"

	"github.com/spf13/cobra"
)

func newDemoCmd(a *app) *cobra.Command {
	var opts demoOptions
	cmd := &cobra.Command{
		Use:   "demo [flags]",
		Short: "run a tool server, the runtime and a model in one process and play a short conversation",
		Long: `Runs a tool server, the runtime and a model in one process and plays a short
conversation: a tool call, a subscription and its events, a sleep and a
wake-up. It always plays the built-in scripted conversation (no API key,
no network) unless --model names another model: API keys in the
environment never change the model by themselves.

Exit status: 0 when every step it reports happened; 1 when one did not;
2 for bad flags.`,
		Example: `  rap demo
  rap demo --verbose
  rap demo --model scripted
  rap demo --model anthropic:claude-sonnet-4-5
  OPENAI_BASE_URL=http://127.0.0.1:11434/v1 rap demo --model openai:llama3.2`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// --log-level and --log-format apply; without --verbose the
			// demo shows only warnings, so its transcript stays readable.
			opts.logger = a.logAtLeast(slog.LevelWarn)
			if opts.verbose {
				opts.logger = a.log
			}
			return demo(cmd.Context(), opts, a.stdout, a.stderr)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.model, "model", "scripted", "model as `PROVIDER:MODEL` (anthropic:MODEL, openai:MODEL, scripted:PATH), or scripted for the built-in script")
	fs.StringVar(&opts.dataDir, "data-dir", "", "keep the runtime's store in `DIR`; default: a temporary directory removed at the end")
	fs.BoolVar(&opts.verbose, "verbose", false, "show the runtime's and the tool server's logs at --log-level (default info); without it only warnings")
	fs.DurationVar(&opts.timeout, "step-timeout", 30*time.Second, "give up on a step after this long")
	return cmd
}
