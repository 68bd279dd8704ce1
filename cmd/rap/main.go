// Command rap runs, inspects and tests RAP tool servers and the gorap agent
// runtime. Run "rap help" for the list of commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one verb of the rap command. Each verb lives in its own file
// and registers itself from an init function.
type command struct {
	name    string
	summary string // one line for "rap help"
	usage   string // the usage line, such as "rap validate URL|FILE"
	// run executes the verb. args are the arguments after the verb name.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("rap: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks an error caused by bad command-line arguments; it exits 2.
var errUsage = errors.New("usage error")

// exitError carries a specific exit status without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return run(ctx, []string{c.name, "--help"}, stdout, stderr)
			}
		}
		printHelp(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "rap: unknown command %q\nRun 'rap help' to see the commands.\n", args[0])
		return 2
	}
	err := c.run(ctx, args[1:], stdout, stderr)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "rap %s: %v\nusage: %s\nRun 'rap %s --help' for details.\n", c.name, err, c.usage, c.name)
		return 2
	default:
		fmt.Fprintf(stderr, "rap %s: %v\n", c.name, err)
		return 1
	}
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, `rap runs and tests Reactive Agent Protocol (RAP) tool servers and the gorap agent runtime.

Usage:
  rap COMMAND [flags] [arguments]

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, "\nRun 'rap COMMAND --help' for a command's flags.\n")
}

// newFlagSet returns a flag set whose --help output shows the command's
// usage line and summary before its flags.
func newFlagSet(c *command, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("rap "+c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\n%s\n", c.usage, c.summary)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprint(fs.Output(), "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseInterspersed parses flags that may appear before, between or after
// positional arguments, and returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
		if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
			// keep consuming positionals until the next flag
			for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				positional = append(positional, args[0])
				args = args[1:]
			}
			if len(args) == 0 {
				return positional, nil
			}
		}
	}
}
