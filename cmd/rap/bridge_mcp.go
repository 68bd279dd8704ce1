package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gorap/gorap/bridge/mcp"
	"github.com/gorap/gorap/rap"
)

func init() {
	registerBridge(&command{
		name:    "mcp",
		summary: "serve an MCP server (stdio command or Streamable HTTP) as a RAP tool server",
		usage:   "rap bridge mcp --listen ADDR [flags] -- COMMAND [ARGS...]\n       rap bridge mcp --listen ADDR [flags] --url URL [--header K=V]...",
		run:     runBridgeMCP,
	})
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ", ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runBridgeMCP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := bridgeCommands["mcp"]
	c = &command{name: "bridge mcp", usage: c.usage, summary: c.summary}
	fs := newFlagSet(c, stderr)
	listen := fs.String("listen", "127.0.0.1:3001", "address the RAP tool server listens on")
	url := fs.String("url", "", "endpoint of a Streamable HTTP MCP server (instead of a command)")
	var headers, env multiFlag
	fs.Var(&headers, "header", "K=V header sent to the --url server (repeatable), such as Authorization=Bearer xyz")
	fs.Var(&env, "env", "K=V environment variable for the MCP server command (repeatable)")
	name := fs.String("name", "", "name of the MCP server: the toolset name and the name in error results (default: the command's base name or the URL's host)")
	prefix := fs.String("prefix", "", "prefix added to every tool name, to avoid collisions between servers")
	mode := fs.String("mode", mcp.ModeDirect, "direct: one RAP tool per MCP tool; proxy: two tools, NAME_list_tools and NAME_invoke_tool")
	token := fs.String("token", "", "bearer token the RAP runtime must send (default $"+envToolToken+"; empty: none)")
	publicURL := fs.String("public-url", "", "base URL the runtime reaches this bridge at, when a proxy rewrites the host")
	samplingModel := fs.String("sampling-model", "", "PROVIDER:MODEL that answers the MCP server's sampling requests ("+modelProviders+"); empty: sampling is declined")
	fs.Usage = func() { printBridgeHelp(stderr, c, fs) }
	pos, err := parseBridgeArgs(fs, args)
	if err != nil {
		return err
	}
	if (len(pos) == 0) == (*url == "") {
		return fmt.Errorf("%w: give either a command after -- (stdio MCP server) or --url URL (Streamable HTTP MCP server)", errUsage)
	}
	if len(headers) > 0 && *url == "" {
		return fmt.Errorf("%w: --header is for --url servers; pass a command's settings with --env", errUsage)
	}
	hdr := map[string]string{}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("%w: --header %q is not K=V", errUsage, h)
		}
		hdr[strings.TrimSpace(k)] = v
	}
	if *token == "" {
		*token = os.Getenv(envToolToken)
	}
	opts := mcp.Options{
		Name: *name, Command: pos, Env: env, URL: *url, Headers: hdr, Prefix: *prefix, Mode: *mode,
		Logger: slog.New(slog.NewTextHandler(stderr, nil)),
		Server: rap.ServerOptions{BearerToken: *token, PublicURL: *publicURL},
	}
	if opts.Name == "" {
		opts.Name = defaultBridgeName(pos, *url)
	}
	if *samplingModel != "" {
		spec, err := parseModelSpec(*samplingModel, getenvOS)
		if err != nil {
			return fmt.Errorf("%w: --sampling-model: %v", errUsage, err)
		}
		if opts.SamplingModel, err = newModel(spec, nil); err != nil {
			return fmt.Errorf("--sampling-model: %w", err)
		}
	}
	return bridgeMCP(ctx, opts, *listen, stdout, nil)
}

// parseBridgeArgs parses flags up to "--"; everything after it is the
// MCP server's command, flags included.
func parseBridgeArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var cmd []string
	for i, a := range args {
		if a == "--" {
			cmd = args[i+1:]
			args = args[:i]
			break
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q; put the MCP server's command after --", errUsage, fs.Arg(0))
	}
	return cmd, nil
}

// defaultBridgeName derives a toolset name from the command or URL.
func defaultBridgeName(cmd []string, url string) string {
	var n string
	if len(cmd) > 0 {
		n = cmd[0]
		launchers := map[string]bool{"npx": true, "node": true, "uvx": true, "uv": true, "python": true, "python3": true, "bunx": true, "deno": true, "docker": true, "pipx": true}
		if launchers[strings.TrimSuffix(baseName(n), ".exe")] {
			for _, a := range cmd[1:] {
				if !strings.HasPrefix(a, "-") && a != "run" {
					n = a
					break
				}
			}
		}
	} else {
		n = strings.TrimPrefix(strings.TrimPrefix(url, "https://"), "http://")
		n, _, _ = strings.Cut(n, "/")
		n, _, _ = strings.Cut(n, ":")
	}
	n = baseName(n)
	n = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, n)
	if n == "" {
		n = "mcp"
	}
	return n
}

// baseName returns the last element of a slash- or backslash-separated
// path.
func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// bridgeMCP serves one MCP server as a RAP tool server until ctx ends.
// ready, when not nil, receives the bound base URL.
func bridgeMCP(ctx context.Context, opts mcp.Options, listen string, stdout io.Writer, ready func(baseURL string)) error {
	b, err := mcp.New(opts)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Shutdown(sctx)
		return fmt.Errorf("listen on %s: %w (pass --listen ADDR to use another address)", listen, err)
	}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	ts := b.Toolset(base + "/")
	fmt.Fprintf(stdout, "rap bridge mcp: serving MCP server %q as a RAP tool server at %s\n", opts.Name, base)
	fmt.Fprintf(stdout, "  tools (%d):", len(ts.Tools))
	for _, t := range ts.Tools {
		fmt.Fprintf(stdout, " %s", t.Name)
	}
	fmt.Fprintln(stdout)
	for _, p := range b.Skipped() {
		fmt.Fprintf(stdout, "  left out: %s\n", p)
	}
	fmt.Fprintf(stdout, "Add it to a runtime with: {\"tool_sets\": [{\"type\": \"toolset_server\", \"server_url\": %q}]}\n", base)
	if ready != nil {
		ready(base)
	}
	var result error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		result = fmt.Errorf("HTTP server on %s stopped: %w", base, err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := b.Shutdown(sctx); err != nil {
		opts.Logger.Warn("bridge shutdown", "err", err)
	}
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		srv.Close()
	}
	return result
}

func printBridgeHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, `usage: %s

Serves one MCP (Model Context Protocol) server as a RAP tool server that any
RAP runtime can use. The MCP server is either a command speaking MCP on
standard input and output (everything after -- is the command and its
arguments; the bridge starts it and restarts it with backoff if it exits)
or a Streamable HTTP endpoint (--url). Each MCP tool becomes a RAP tool;
calls are acknowledged at once and run in the background; progress becomes
"progress" view updates. See docs/mcp.md for the full mapping.

Examples:
  rap bridge mcp --listen 127.0.0.1:3001 -- npx -y @modelcontextprotocol/server-everything
  rap bridge mcp --listen 127.0.0.1:3002 --name files --prefix fs_ -- mcp-server-filesystem /tmp
  rap bridge mcp --listen 127.0.0.1:3003 --url https://mcp.example.com/mcp --header "Authorization=Bearer $KEY"
  rap bridge mcp --listen 127.0.0.1:3004 --mode proxy -- big-mcp-server

Then: rap validate http://127.0.0.1:3001 and rap invoke http://127.0.0.1:3001 TOOL '{...}'
`, c.usage)
	if fs != nil {
		fmt.Fprint(w, "\nFlags:\n")
		fs.PrintDefaults()
	}
}
