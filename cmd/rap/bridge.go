package main

// "rap bridge KIND": serve another tool protocol's tools as a RAP tool
// server. Each kind lives in its own file (bridge_mcp.go, bridge_otc.go)
// and registers itself with registerBridge from an init function.

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

// bridgeCommands are the subverbs of "rap bridge".
var bridgeCommands = map[string]*command{}

// registerBridge adds a "rap bridge NAME" subverb.
func registerBridge(c *command) {
	if _, dup := bridgeCommands[c.name]; dup {
		panic("rap: bridge subcommand registered twice: " + c.name)
	}
	bridgeCommands[c.name] = c
}

func init() {
	register(&command{
		name:    "bridge",
		summary: "serve another tool protocol's tools as a RAP tool server (rap bridge mcp|otc|toolsjson ...)",
		usage:   "rap bridge KIND [flags] [arguments]",
		run:     runBridge,
	})
}

// runBridge dispatches to the subverb named by args[0].
func runBridge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, "usage: rap bridge KIND [flags] [arguments]\n\nKinds:\n")
		names := make([]string, 0, len(bridgeCommands))
		for n := range bridgeCommands {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(stderr, "  %-10s %s\n", n, bridgeCommands[n].summary)
		}
		fmt.Fprintf(stderr, "\nRun 'rap bridge KIND --help' for a kind's flags and examples.\n")
		if len(args) == 0 {
			return fmt.Errorf("%w: say which protocol to bridge: rap bridge %s ...", errUsage, strings.Join(names, "|"))
		}
		return nil
	}
	c, ok := bridgeCommands[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown bridge kind %q; run 'rap bridge --help' for the list", errUsage, args[0])
	}
	return c.run(ctx, args[1:], stdout, stderr)
}
