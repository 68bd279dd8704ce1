package main

// "rap bridge KIND": serve another tool protocol's tools as a RAP tool
// server. Each kind lives in its own file (bridge_mcp.go, bridge_otc.go,
// bridge_toolsjson.go).

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newBridgeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bridge KIND [flags] [arguments]",
		Short: "serve another tool protocol's tools as a RAP tool server (rap bridge mcp|otc|toolsjson ...)",
		Example: `  rap bridge mcp -- npx -y @modelcontextprotocol/server-everything
  rap bridge otc http://127.0.0.1:8002
  rap bridge toolsjson agents/weather`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return unknownSubcommand(cmd, args, "say which protocol to bridge")
		},
	}
	cmd.AddCommand(newBridgeMCPCmd(a), newBridgeOTCCmd(a), newBridgeToolsJSONCmd(a))
	return cmd
}

// unknownSubcommand is the usage error of a verb with subcommands run
// without one (missing says what to do) or with an unknown one, which gets
// suggestions.
func unknownSubcommand(cmd *cobra.Command, args []string, missing string) error {
	var names []string
	for _, c := range availableSubcommands(cmd) {
		names = append(names, c.Name())
	}
	if len(args) == 0 {
		return usageErrorf("%s: %s %s ...", missing, cmd.CommandPath(), strings.Join(names, "|"))
	}
	msg := fmt.Sprintf("unknown command %q for %q; want %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))
	cmd.SuggestionsMinimumDistance = 2
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return usageErrorf("%s", msg)
}
