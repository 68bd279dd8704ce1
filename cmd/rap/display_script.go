package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/gorap/gorap/display"
	"github.com/spf13/cobra"
)

func newDisplayScriptCmd(a *app) *cobra.Command {
	var tool string
	cmd := &cobra.Command{
		Use:   "display-script SCRIPT|@FILE ARGS_JSON [--tool NAME]",
		Short: "evaluate a tool's displayScript on some arguments, as a frontend would show the call",
		Long: `Evaluates SCRIPT (a Rhai displayScript, or @FILE to read it from a file) with
"args" bound to ARGS_JSON, in the same sandbox the runtime uses, and prints
the text a frontend would show for the call.

When the script fails to compile or run, or returns something other than a
string, the frontend falls back to the default rendering name(args) (RAP DS-2).
That fallback is printed on stdout, the reason on stderr, and the exit status
is 1 so that scripts can be checked in CI.`,
		Example: `  rap display-script '"PR #" + args.number + " on " + args.owner + "/" + args.repo' \
      '{"owner":"acme","repo":"widgets","number":42}'
  PR #42 on acme/widgets`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDisplayScript(cmd.Context(), a, tool, args)
		},
	}
	cmd.Flags().StringVar(&tool, "tool", "tool", "the tool `NAME` used by the default rendering name(args) when the script fails")
	return cmd
}

func runDisplayScript(ctx context.Context, a *app, toolName string, pos []string) error {
	stdout, stderr, tool := a.stdout, a.stderr, &toolName
	if len(pos) != 2 {
		return fmt.Errorf("%w: want SCRIPT and ARGS_JSON, got %s", errUsage, plural(len(pos), "argument"))
	}
	src := pos[0]
	if strings.HasPrefix(src, "@") {
		b, err := os.ReadFile(src[1:])
		if err != nil {
			return fmt.Errorf("reading the script: %w", err)
		}
		src = string(b)
	}
	raw := json.RawMessage(pos[1])
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var argv map[string]any
	if err := dec.Decode(&argv); err != nil || argv == nil {
		return fmt.Errorf("%w: ARGS_JSON must be a JSON object such as '{\"owner\":\"acme\"}'", errUsage)
	}

	fallback := func(reason error) error {
		fmt.Fprintln(stdout, display.Default(*tool, raw))
		fmt.Fprintf(stderr, "rap display-script: the script fell back to the default rendering: %v\n", reason)
		return exitError{code: 1}
	}
	script, err := display.Compile(src, nil)
	if err != nil {
		return fallback(err)
	}
	text, err := script.Eval(ctx, argv)
	if err != nil {
		return fallback(err)
	}
	fmt.Fprintln(stdout, text)
	return nil
}
