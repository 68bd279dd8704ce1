// Command rap runs, inspects and tests RAP tool servers and the gorap agent
// runtime. Run "rap help" for the list of commands; docs/cli.md lists every
// verb and flag.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gorap/gorap/runtime/config"
	"github.com/spf13/cobra"
)

// errUsage marks an error caused by bad command-line arguments; it exits 2.
var errUsage = errors.New("usage error")

// exitError carries a specific exit status without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Exit statuses of rap (documented in docs/cli.md).
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // bad verb, flag, flag value, environment variable or arguments
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// app is one invocation of rap: where it writes, where it reads the
// environment, and the logger its persistent flags chose. Each verb's
// constructor takes it, so that tests can run many invocations at once.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// log is the logger of --log-level and --log-format, set before a
	// verb runs.
	log       *slog.Logger
	logLevel  string
	logFormat string
	// ran is set when a verb's own code starts: an error before it is a
	// usage error (cobra rejected the verb, a flag or an argument).
	ran bool
}

// run executes rap with args (without the program name) and returns the
// exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: os.Getenv}
	root := newRootCmd(a)
	root.SetArgs(args)
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		// Flag usages mark their argument's name with backquotes for
		// --help (`FILE`); a shell shows completion descriptions as they
		// are, so the marks go.
		root.SetOut(withoutBackquotes{stdout})
	}
	cmd, err := root.ExecuteContextC(ctx)
	return a.exitCode(cmd, err)
}

// withoutBackquotes writes what it is given without its backquotes.
type withoutBackquotes struct{ w io.Writer }

func (b withoutBackquotes) Write(p []byte) (int, error) {
	if _, err := b.w.Write(bytes.ReplaceAll(p, []byte("`"), nil)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// exitCode prints err, when there is one, and returns rap's exit status
// for it: 2 for a usage error, 1 for a failure.
func (a *app) exitCode(cmd *cobra.Command, err error) int {
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case !a.ran || errors.Is(err, errUsage):
		name := "rap"
		if cmd != nil {
			name = cmd.CommandPath()
		}
		msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
		fmt.Fprintf(a.stderr, "%s: %s\n", name, strings.TrimRight(msg, "\n"))
		if cmd != nil && cmd.Runnable() {
			fmt.Fprintf(a.stderr, "usage: %s\n", cmd.UseLine())
		}
		fmt.Fprintf(a.stderr, "Run '%s --help' for details.\n", name)
		return exitUsage
	default:
		name := "rap"
		if cmd != nil {
			name = cmd.CommandPath()
		}
		fmt.Fprintf(a.stderr, "%s: %v\n", name, err)
		return exitFailure
	}
}

// usageErrorf returns a usage error (exit status 2) with a message.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// newRootCmd builds the whole command tree of rap.
func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "rap",
		Short: "run and test Reactive Agent Protocol (RAP) tool servers and the gorap agent runtime",
		Long: `rap runs and tests Reactive Agent Protocol (RAP) tool servers and the gorap agent runtime.

Exit status: 0 on success, 1 when the command ran and failed, 2 for a usage
error (unknown verb or flag, bad flag value or environment variable, wrong
arguments). Every verb takes --log-level and --log-format.`,
		Example: `  rap demo                                  # a whole conversation, no API key needed
  rap serve --model scripted:script.json    # the runtime with a scripted model
  rap chat                                  # talk to it in the terminal
  rap example get-time                      # an example tool server
  rap completion bash > /etc/bash_completion.d/rap`,
		Version:       versionString(readBuildInfo()),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Verbs with positional arguments check them themselves, with
		// messages that say what is wanted.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return a.prepare(cmd) },
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(flagError)
	root.SuggestionsMinimumDistance = 2
	pf := root.PersistentFlags()
	a.logLevel, a.logFormat = "info", "text"
	pf.Var(&enumValue{p: &a.logLevel, allowed: []string{"debug", "info", "warn", "error"}, want: wantLogLevel},
		"log-level", "least severe log `LEVEL` shown on standard error: debug, info, warn or error")
	pf.Var(&enumValue{p: &a.logFormat, allowed: []string{"text", "json"}, want: wantLogFormat},
		"log-format", "log `FORMAT` on standard error: text or json")
	bindEnv(pf, "log-level", config.EnvLogLevel)
	bindEnv(pf, "log-format", envLogFormat)

	root.AddCommand(
		newBenchIdleCmd(a),
		newBenchLatencyCmd(a),
		newBenchRuntimeCmd(a),
		newBenchSlowCmd(a),
		newBridgeCmd(a),
		newChatCmd(a),
		newConformanceCmd(a),
		newDeleteCmd(a),
		newDemoCmd(a),
		newDisplayScriptCmd(a),
		newExampleCmd(a),
		newExportCmd(a),
		newImportCmd(a),
		newInvokeCmd(a),
		newLoadtestCmd(a),
		newMCPCmd(a),
		newMigrateCmd(a),
		newOutboxCmd(a),
		newReplayCmd(a),
		newServeCmd(a),
		newStatusCmd(a),
		newTokenCmd(a),
		newToolsJSONCmd(a),
		newValidateCmd(a),
		newVersionCmd(a),
		newGenDocsCmd(a),
	)
	root.SetHelpCommand(newHelpCmd(root))
	root.InitDefaultCompletionCmd()
	_ = root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	_ = root.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	addBuiltinExamples(root)
	markRunning(root, a)
	return root
}

// markRunning wraps the RunE of every command so that a.ran is set when the
// command's own code starts, and sends pflag's own notes (a deprecated
// flag) to standard error.
func markRunning(c *cobra.Command, a *app) {
	c.Flags().SetOutput(a.stderr)
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			a.ran = true
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markRunning(sub, a)
	}
}

// prepare runs before every verb: it applies the environment variables
// behind flags the command line did not set, then builds the logger.
func (a *app) prepare(cmd *cobra.Command) error {
	if err := applyEnv(cmd.Flags(), a.getenv); err != nil {
		return err
	}
	log, err := newLogger(a.stderr, a.logLevel, a.logFormat)
	if err != nil {
		return err
	}
	a.log = log
	return nil
}

// newLogger returns a logger writing to w at level in format (text or
// json); the flags have validated both.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("log level %q: %s", level, wantLogLevel)
	}
	return newLoggerAt(w, l, format), nil
}

func newLoggerAt(w io.Writer, l slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// logAtLeast returns the logger of --log-level and --log-format, showing
// nothing below min: the verbs whose --verbose shows only warnings.
func (a *app) logAtLeast(min slog.Level) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(a.logLevel))
	return newLoggerAt(a.stderr, max(l, min), a.logFormat)
}

// newHelpCmd is "rap help [VERB...]": cobra's help verb, except that an
// unknown verb is a usage error with suggestions, as everywhere else.
func newHelpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:     "help [VERB]",
		Short:   "show the help of rap or of a verb",
		Example: "  rap help serve\n  rap help bridge mcp\n  rap serve --help",
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			c, _, err := root.Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, sub := range availableSubcommands(c) {
				names = append(names, cobra.CompletionWithDesc(sub.Name(), sub.Short))
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			c, rest, err := root.Find(args)
			switch {
			case err != nil:
				return usageErrorf("%v", err)
			case len(rest) > 0:
				return unknownSubcommand(c, rest, "")
			}
			return c.Help()
		},
	}
}

// addBuiltinExamples gives cobra's own verbs (completion) examples, like
// every other verb.
func addBuiltinExamples(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "completion":
			c.Example = "  rap completion bash > ~/.local/share/bash-completion/completions/rap\n  rap completion zsh > \"${fpath[1]}/_rap\"\n  rap completion fish > ~/.config/fish/completions/rap.fish\n  rap completion powershell | Out-String | Invoke-Expression"
			for _, sub := range c.Commands() {
				sub.Example = "  rap completion " + sub.Name()
			}
		}
	}
}
