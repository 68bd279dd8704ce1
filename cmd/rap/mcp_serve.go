package main

// "rap mcp serve": the tools of RAP tool servers as an MCP server, for
// MCP hosts (package bridge/mcpserve). The other direction, an MCP
// server as a RAP tool server, is "rap bridge mcp".

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/gorap/gorap/bridge/mcpserve"
	"github.com/gorap/gorap/runtime/config"
	"github.com/spf13/cobra"
)

// mcpServePath is where "rap mcp serve --listen" serves its MCP endpoint.
const mcpServePath = "/mcp"

func newMCPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "mcp VERB [flags] [arguments]",
		Short:   "serve RAP tools to MCP hosts (rap mcp serve ...)",
		Example: `  rap mcp serve http://127.0.0.1:3001`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return unknownSubcommand(cmd, args, "say what to do")
		},
	}
	cmd.AddCommand(newMCPServeCmd(a))
	return cmd
}

// mcpServeFlags are the flags of "rap mcp serve".
type mcpServeFlags struct {
	configs                                       []string
	listen, token, toolToken, callbackListen      string
	user                                          string
	allowedHosts, allowedOrigins                  []string
	callTimeout, progressInterval, sessionTimeout time.Duration
	taskTimeout                                   time.Duration
}

func newMCPServeCmd(a *app) *cobra.Command {
	var f mcpServeFlags
	cmd := &cobra.Command{
		Use:   "serve [flags] URL... | serve [flags] --config FILE",
		Short: "serve the tools of RAP tool servers as an MCP server (stdio, or Streamable HTTP with --listen)",
		Long: `Serves the tools of RAP tool servers as an MCP (Model Context Protocol)
server, so that MCP hosts (Claude Desktop, IDEs, any MCP client) can call
them. The tool servers are the base URLs given as arguments and the
toolset_server entries of --config files; their toolsets are discovered at
start (a server that cannot be reached is reported and left out).

By default it speaks MCP on standard input and output, as hosts start
their MCP servers; with --listen ADDR it serves Streamable HTTP at
http://ADDR/mcp instead, and then needs a bearer token (--token, better
RAP_TOKEN) when ADDR is not a loopback address. Requests from other sites'
pages (Origin) and to foreign host names are refused.

An MCP tools/call becomes a RAP invocation whose callbacks come to a
loopback listener of this process (--callback-listen); the call waits for
the result, up to --call-timeout, sending MCP progress notifications
meanwhile. A client that supports MCP tasks (protocol 2025-11-25) may run
a call as a task instead: the call returns a task at once, the client
polls it (tasks/get) and fetches its result (tasks/result) when the tool's
callback arrives, up to --task-timeout; tasks/cancel cancels it. A
cancelled request or task sends RAP /cancel_tool_call. A tool's
user_choice is asked as an MCP elicitation; a subscription returns a
resource that holds its events. See docs/mcp.md, "RAP tools in MCP hosts".`,
		Example: `  rap mcp serve http://127.0.0.1:3001
  rap mcp serve --config ~/.config/rap/rap.json
  RAP_TOKEN=$(openssl rand -hex 32) rap mcp serve --listen 0.0.0.0:8765 http://127.0.0.1:3001`,
		RunE: func(cmd *cobra.Command, args []string) error { return runMCPServe(cmd.Context(), a, f, args) },
	}
	fs := cmd.Flags()
	fs.Var(&listFlag{dst: &f.configs, typ: "list"}, "config", "tool-server config `FILE` whose toolset_server entries are served (repeatable)")
	fs.StringVar(&f.listen, "listen", "", "serve Streamable HTTP on `ADDR` (at /mcp) instead of standard input and output")
	fs.Var((*secretValue)(&f.token), "token", "bearer `TOKEN` MCP clients must send over HTTP; required when --listen is not a loopback address (prefer the env var: flags show in ps)")
	bindEnv(fs, "token", config.EnvToken)
	fs.Var((*secretValue)(&f.toolToken), "tool-token", "bearer `TOKEN` sent to the tool servers")
	bindEnv(fs, "tool-token", config.EnvToolToken)
	fs.StringVar(&f.callbackListen, "callback-listen", "127.0.0.1:0", "`ADDR` of the listener the tools' callbacks come to; the tool servers must reach it")
	fs.DurationVar(&f.callTimeout, "call-timeout", mcpserve.DefaultCallTimeout, "longest wait for a tool's result; then the call is cancelled and the MCP result is an error saying so")
	fs.DurationVar(&f.taskTimeout, "task-timeout", mcpserve.DefaultTaskTimeout, "longest wait for the result of a call the client runs as an MCP task; then the task is cancelled and fails")
	fs.DurationVar(&f.progressInterval, "progress-interval", mcpserve.DefaultProgressInterval, "while a call waits, tell a client that gave a progress token that it still waits this often (0: never)")
	fs.DurationVar(&f.sessionTimeout, "session-timeout", mcpserve.DefaultSessionTimeout, "with --listen: close an MCP session without requests for this long")
	fs.StringVar(&f.user, "user", "", "user_id `ID` sent with every invocation (default: none)")
	fs.Var(&listFlag{dst: &f.allowedHosts, typ: "commaList", comma: true}, "allowed-hosts", "with --listen: `HOSTS` (comma-separated, repeatable) the endpoint answers to besides loopback names and IP addresses; *.example.com allows subdomains")
	fs.Var(&listFlag{dst: &f.allowedOrigins, typ: "commaList", comma: true}, "allowed-origins", "with --listen: `ORIGINS` (comma-separated, repeatable) such as https://app.example.com whose web pages may use the endpoint")
	return cmd
}

func runMCPServe(ctx context.Context, a *app, f mcpServeFlags, pos []string) error {
	if f.callTimeout <= 0 {
		return usageErrorf("--call-timeout %v: want a positive duration such as 90s or 30m", f.callTimeout)
	}
	if f.taskTimeout <= 0 {
		return usageErrorf("--task-timeout %v: want a positive duration such as 30m or 2h", f.taskTimeout)
	}
	if f.progressInterval < 0 || f.sessionTimeout < 0 {
		return usageErrorf("--progress-interval and --session-timeout must not be negative")
	}
	urls, err := mcpServeURLs(f.configs, pos, a.stderr)
	if err != nil {
		return err
	}
	var ln net.Listener
	if f.listen != "" {
		if ln, err = net.Listen("tcp", f.listen); err != nil {
			return fmt.Errorf("listen on %s: %w (pass --listen ADDR to use another address)", f.listen, err)
		}
		defer ln.Close()
		if ta, ok := ln.Addr().(*net.TCPAddr); f.token == "" && (!ok || !ta.IP.IsLoopback()) {
			return usageErrorf("refusing to serve MCP on %s without a token: anyone who can reach it could call the tools. "+
				"Set %s to a long random secret (for example: export %s=$(openssl rand -hex 32)) and give MCP clients the header "+
				"Authorization: Bearer with it; or listen on loopback only (--listen 127.0.0.1:8765)", ln.Addr(), config.EnvToken, config.EnvToken)
		}
	}
	progress := f.progressInterval
	if progress == 0 {
		progress = -1 // never
	}
	s, err := mcpserve.New(ctx, mcpserve.Options{
		ServerURLs: urls, ToolToken: f.toolToken, CallbackListen: f.callbackListen,
		CallTimeout: f.callTimeout, TaskTimeout: f.taskTimeout, ProgressInterval: progress, UserID: f.user,
		Name: "gorap", Version: versionString(readBuildInfo()), Logger: a.log,
	})
	if err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "mcpserve: "))
	}
	// On stdio, standard output carries MCP: the report goes to standard
	// error.
	report := a.stderr
	if ln != nil {
		report = a.stdout
	}
	tools := s.Tools()
	fmt.Fprintf(report, "rap mcp serve: %s of %s: %s\n", plural(len(tools), "tool"), plural(len(urls), "tool server"), strings.Join(tools, ", "))
	for _, p := range s.Skipped() {
		fmt.Fprintf(report, "  left out: %s\n", p)
	}
	if ln == nil {
		fmt.Fprintln(report, "rap mcp serve: speaking MCP on standard input and output")
		return s.RunStdio(ctx)
	}
	base, _ := listenURLs("http", ln.Addr())
	fmt.Fprintf(report, "rap mcp serve: MCP endpoint (Streamable HTTP) at %s%s\n", base, mcpServePath)
	return s.Serve(ctx, ln, mcpServePath, mcpserve.HTTPOptions{
		Token: f.token, AllowedHosts: f.allowedHosts, AllowedOrigins: f.allowedOrigins, SessionTimeout: f.sessionTimeout,
	})
}

// mcpServeURLs returns the tool servers to serve: the arguments and the
// toolset_server entries of the config files, without duplicates. Other
// entry types are reported on w and left out: this command serves running
// tool servers only.
func mcpServeURLs(configs, pos []string, w io.Writer) ([]string, error) {
	seen := map[string]bool{}
	var urls []string
	add := func(u string) {
		u = strings.TrimRight(u, "/")
		if !seen[u] {
			seen[u] = true
			urls = append(urls, u)
		}
	}
	for _, p := range pos {
		if !isURL(p) {
			return nil, usageErrorf("%q is not a tool server URL: give base URLs such as http://127.0.0.1:3001, or --config FILE", p)
		}
		add(p)
	}
	for _, path := range configs {
		f, err := config.LoadFile(path)
		if err != nil {
			return nil, usageErrorf("--config: %v", err)
		}
		for _, e := range f.ToolSets {
			if e.Type != config.TypeToolsetServer {
				fmt.Fprintf(w, "rap mcp serve: %s: a %s entry is left out: rap mcp serve serves running tool servers (toolset_server entries) only\n", e.Source, e.Type)
				continue
			}
			add(e.ServerURL)
		}
	}
	if len(urls) == 0 {
		return nil, usageErrorf("no tool server to serve: give base URLs such as http://127.0.0.1:3001, or --config FILE with toolset_server entries")
	}
	return urls, nil
}

// listFlag is a repeatable flag of values, comma-separated when comma is
// set. Its type is that of rap serve's flag of the same name, which means
// the same (TestOneMeaningPerFlagName).
type listFlag struct {
	dst   *[]string
	typ   string
	comma bool
}

func (l *listFlag) String() string { return strings.Join(*l.dst, ",") }
func (l *listFlag) Type() string   { return l.typ }
func (l *listFlag) Set(v string) error {
	items := []string{v}
	if l.comma {
		items = strings.Split(v, ",")
	}
	for _, item := range items {
		if item = strings.TrimSpace(item); item != "" {
			*l.dst = append(*l.dst, item)
		}
	}
	return nil
}
