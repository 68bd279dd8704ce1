package main

// docs/cli.md is generated from the command tree: "go generate ./cmd/rap"
// runs the hidden verb "rap gen-docs", and TestCLIDocsUpToDate fails when
// the file differs from what the tree generates.

//go:generate go run . gen-docs ../../docs/cli.md

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newGenDocsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "gen-docs FILE",
		Short:   "write the command reference (docs/cli.md) generated from the command tree",
		Example: "  go generate ./cmd/rap   # runs: rap gen-docs ../../docs/cli.md",
		Hidden:  true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("want the output FILE")
			}
			return os.WriteFile(args[0], cliDocs(), 0o644)
		},
	}
}

// docsEnv is the environment the reference is generated in: defaults that
// depend on the environment (the data directory) read the same on every
// machine.
func docsEnv(k string) string {
	if k == "HOME" {
		return "~"
	}
	return ""
}

// cliDocs renders docs/cli.md from a fresh command tree.
func cliDocs() []byte {
	a := &app{stdout: io.Discard, stderr: io.Discard, getenv: docsEnv}
	root := newRootCmd(a)
	root.Version = "" // the version differs from build to build
	var b bytes.Buffer
	b.WriteString(`# The rap command

<!-- Generated from the command tree by "go generate ./cmd/rap"; do not edit.
     TestCLIDocsUpToDate fails when this file is out of date. -->

Every verb of ` + "`rap`" + `, its flags and examples. ` + "`rap VERB --help`" + ` shows the same.

Conventions:

- Exit status: 0 on success, 1 when the command ran and failed, 2 for a usage
  error (unknown verb or flag, bad flag value or environment variable, missing
  or extra arguments).
- A setting with an environment variable (shown as "env NAME") takes the
  variable when the flag is not given; a flag wins. A bad value gives the same
  message from either.
- ` + "`--token`" + ` is always the runtime's client token (RAP_TOKEN), in ` + "`rap serve`" + ` and
  ` + "`rap chat`" + `. The token between a runtime and a tool server is ` + "`--tool-token`" + `
  (RAP_TOOL_TOKEN) everywhere. In the verbs that only talk to tool servers
  (invoke, validate, example, loadtest, bridge, replay), ` + "`--token`" + ` still works
  as a deprecated alias of ` + "`--tool-token`" + ` and prints a warning.
- ` + "`--log-level`" + ` and ` + "`--log-format text|json`" + ` work on every verb.
- ` + "`rap --version`" + ` prints the module version and the commit it was built from.
- ` + "`rap completion bash|zsh|fish|powershell`" + ` prints a shell completion script.

`)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || (!c.IsAvailableCommand() && c != root && c.Name() != "help") {
			return
		}
		writeCommandDoc(&b, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return b.Bytes()
}

// writeCommandDoc writes one command's section.
func writeCommandDoc(b *bytes.Buffer, c *cobra.Command) {
	level := strings.Repeat("#", max(2, min(1+strings.Count(c.CommandPath(), " "), 4)))
	fmt.Fprintf(b, "%s %s\n\n", level, c.CommandPath())
	if c.Runnable() {
		fmt.Fprintf(b, "```\n%s\n```\n\n", c.UseLine())
	}
	if c.Long != "" {
		fmt.Fprintf(b, "%s\n\n", strings.TrimSpace(c.Long))
	} else {
		fmt.Fprintf(b, "%s.\n\n", strings.TrimSuffix(upperFirst(c.Short), "."))
	}
	if c.Example != "" {
		fmt.Fprintf(b, "Examples:\n\n```\n%s\n```\n\n", strings.TrimRight(c.Example, "\n"))
	}
	if subs := availableSubcommands(c); len(subs) > 0 {
		b.WriteString("Commands:\n\n")
		for _, s := range subs {
			fmt.Fprintf(b, "- `%s`: %s\n", s.CommandPath(), s.Short)
		}
		b.WriteString("\n")
	}
	if fs := c.NonInheritedFlags(); hasVisible(fs) {
		fmt.Fprintf(b, "Flags:\n\n```\n%s```\n\n", fs.FlagUsagesWrapped(100))
	}
}

func availableSubcommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			out = append(out, s)
		}
	}
	return out
}

func hasVisible(fs *pflag.FlagSet) bool {
	visible := false
	fs.VisitAll(func(f *pflag.Flag) { visible = visible || (!f.Hidden && f.Name != "help") })
	return visible
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
