package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorap/gorap/bridge/mcp"
	"github.com/gorap/gorap/internal/privfile"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
	"github.com/spf13/cobra"
)

// bridgeMCPFlags are the flags of "rap bridge mcp".
type bridgeMCPFlags struct {
	listen, url, name, prefix, mode, token, publicURL, samplingModel string
	dataDir, oauthDir, oauthRedirect, metricsListen                  string
	headers, env                                                     multiFlag
	callTimeout, startupTimeout                                      time.Duration
}

func newBridgeMCPCmd(a *app) *cobra.Command {
	var f bridgeMCPFlags
	cmd := &cobra.Command{
		Use:   "mcp [flags] -- COMMAND [ARGS...] | mcp [flags] --url URL [--header K=V]...",
		Short: "serve an MCP server (stdio command or Streamable HTTP) as a RAP tool server",
		Long: `Serves one MCP (Model Context Protocol) server as a RAP tool server that any
RAP runtime can use. The MCP server is either a command speaking MCP on
standard input and output (everything after -- is the command and its
arguments; the bridge starts it and restarts it with backoff if it exits)
or a Streamable HTTP endpoint (--url). Each MCP tool becomes a RAP tool;
calls are acknowledged at once and run in the background; progress becomes
"progress" view updates. See docs/mcp.md for the full mapping.

Then: rap validate http://127.0.0.1:3001 and rap invoke http://127.0.0.1:3001 TOOL '{...}'`,
		Example: `  rap bridge mcp --listen 127.0.0.1:3001 -- npx -y @modelcontextprotocol/server-everything
  rap bridge mcp --listen 127.0.0.1:3002 --name files --prefix fs_ -- mcp-server-filesystem /tmp
  rap bridge mcp --listen 127.0.0.1:3003 --url https://mcp.example.com/mcp --header "Authorization=Bearer $KEY"
  rap bridge mcp --listen 127.0.0.1:3004 --mode proxy -- big-mcp-server`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return usageErrorf("unexpected argument %q; put the MCP server's command after --", args[0])
			}
			return runBridgeMCP(cmd.Context(), a, f, args)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", "127.0.0.1:3001", "`ADDR` the RAP tool server listens on")
	fs.StringVar(&f.url, "url", "", "endpoint `URL` of a Streamable HTTP MCP server (instead of a command)")
	fs.Var(&f.headers, "header", "`K=V` header sent to the --url server (repeatable), such as Authorization=Bearer xyz")
	fs.Var(&f.env, "env", "`K=V` environment variable for the MCP server command (repeatable)")
	fs.StringVar(&f.name, "name", "", "`NAME` of the MCP server: the toolset name and the name in error results (default: the command's base name or the URL's host)")
	fs.StringVar(&f.prefix, "prefix", "", "`PREFIX` added to every MCP tool name, to avoid collisions between servers (default none; the bridge's own tools, such as NAME_subscribe_resource, are named after --name)")
	fs.StringVar(&f.mode, "mode", mcp.ModeDirect, "`MODE` direct: one RAP tool per MCP tool; proxy: two tools, NAME_list_tools and NAME_invoke_tool")
	addToolTokenFlag(fs, &f.token, "bearer `TOKEN` the RAP runtime must send (empty: none)")
	fs.StringVar(&f.publicURL, "public-url", "", "base `URL` the runtime reaches this bridge at, when a proxy rewrites the host")
	fs.StringVar(&f.samplingModel, "sampling-model", "", "`PROVIDER:MODEL` that answers the MCP server's sampling requests ("+modelProviders+"); empty: sampling is declined")
	fs.StringVar(&f.dataDir, "data-dir", "", "`DIR` of a durable store (DIR/NAME.db) so that resource subscriptions and undelivered callbacks survive a restart (default: in memory)")
	fs.StringVar(&f.oauthDir, "oauth-dir", "", "enable MCP OAuth for the --url server: `DIR` of the per-user token files (0600)")
	fs.DurationVar(&f.callTimeout, "call-timeout", mcp.DefaultCallTimeout, "give up on a tools/call the MCP server has not answered after this long (the RAP call ends with an Error: result); calls the server runs as MCP tasks are not bounded by it")
	fs.DurationVar(&f.startupTimeout, "startup-timeout", 0, "start-up limit: how long the MCP server may take to start and answer MCP's initialize (0: "+mcp.DefaultConnectTimeout.String()+", or "+mcp.DefaultLauncherConnectTimeout.String()+" for a command run by npx, uvx and other package launchers, whose first start downloads the package)")
	addMetricsListenFlag(fs, &f.metricsListen)
	fs.StringVar(&f.oauthRedirect, "oauth-redirect-url", "", "`URL` where the user's browser reaches this bridge's "+mcp.CallbackPath+" (default: http://LISTEN"+mcp.CallbackPath+")")
	return cmd
}

func runBridgeMCP(ctx context.Context, a *app, f bridgeMCPFlags, pos []string) error {
	url, headers, env, token := &f.url, f.headers, f.env, &f.token
	name, prefix, mode, publicURL, samplingModel := &f.name, &f.prefix, &f.mode, &f.publicURL, &f.samplingModel
	if (len(pos) == 0) == (*url == "") {
		return fmt.Errorf("%w: give either a command after -- (stdio MCP server) or --url URL (Streamable HTTP MCP server)", errUsage)
	}
	if f.callTimeout <= 0 {
		return fmt.Errorf("%w: --call-timeout %v: want a positive duration such as 90s or 30m", errUsage, f.callTimeout)
	}
	if f.startupTimeout < 0 {
		return fmt.Errorf("%w: --startup-timeout %v: want a positive duration such as 5m, or 0 for the default", errUsage, f.startupTimeout)
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
	opts := &mcp.Options{
		Name: *name, Command: pos, Env: env, URL: *url, Headers: hdr, Prefix: *prefix, Mode: *mode,
		Logger: a.log, CallTimeout: f.callTimeout, ConnectTimeout: f.startupTimeout,
		Server: &rap.ServerOptions{BearerToken: *token, PublicURL: *publicURL},
	}
	if f.oauthDir != "" {
		redirect := f.oauthRedirect
		if redirect == "" {
			redirect = "http://" + f.listen + mcp.CallbackPath
		}
		opts.OAuth = &mcp.OAuthOptions{TokenDir: f.oauthDir, RedirectURL: redirect}
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
	if f.dataDir != "" {
		if err := privfile.MkdirAll(f.dataDir); err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
		st, err := durable.Open(filepath.Join(f.dataDir, opts.Name+".db"))
		if err != nil {
			return fmt.Errorf("--data-dir: opening the store: %w", err)
		}
		defer st.Close()
		opts.Server.Store = st
	}
	reg, stopMetrics, err := bridgeMetrics(ctx, "mcp", f.metricsListen, a.stdout, a.log) // bridge_metrics.go
	if err != nil {
		return err
	}
	defer stopMetrics()
	opts.Server.Metrics = reg
	tp, log, stopTracing, err := startTracing(ctx, "gorap-bridge-mcp", opts.Logger) // tracing.go
	if err != nil {
		return err
	}
	defer stopTracing()
	opts.Server.TracerProvider, opts.Logger = tp, log
	return bridgeMCP(ctx, opts, f.listen, a.stdout, nil)
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
func bridgeMCP(ctx context.Context, opts *mcp.Options, listen string, stdout io.Writer, ready func(baseURL string)) error {
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
	// The tool-server SDK's connection limits, as every rap.Server has:
	// timeouts, the minimum body rate, header size, connection cap.
	var so rap.ServerOptions
	if opts.Server != nil {
		so = *opts.Server
	}
	srv := rap.NewHTTPServer(b, so.HTTP, so.Logger)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(rap.LimitListener(ln, rap.DefaultMaxConns, so.Logger)) }()
	base, _ := listenURLs("http", ln.Addr())
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
