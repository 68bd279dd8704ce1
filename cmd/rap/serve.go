package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gorap/gorap/display"
	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/internal/privfile"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/clientauth"
	"github.com/gorap/gorap/runtime/config"
	"github.com/gorap/gorap/runtime/metrics"
	"github.com/gorap/gorap/webui"
)

// storeFile is the name of the SQLite store inside the data dir.
const storeFile = "runtime.db"

// shutdownGrace bounds how long "rap serve" waits for work in flight when
// it is asked to stop.
const shutdownGrace = 10 * time.Second

// server is a running "rap serve": the runtime, its store and its HTTP
// server. serve builds one; tests use its fields.
type server struct {
	Runtime   *runtime.Runtime
	URL       string // the bound listen URL, such as http://127.0.0.1:8080
	PublicURL string // the base tools call back to
	Model     string // the model's description
	// HTTP is the runtime's HTTP server (its timeouts and limits).
	HTTP *http.Server
	// MetricsURL is the URL of /metrics on --metrics-listen, "" without.
	MetricsURL string
}

// toolsetPins turns the "sha256" and "pin" members of the toolset_server
// entries into the runtime's pins (RAP TS-11).
func toolsetPins(f *config.File) map[string]runtime.ToolsetPin {
	pins := map[string]runtime.ToolsetPin{}
	for base, p := range f.ToolsetPins() {
		file, entry := p.Source, ""
		if i := strings.LastIndex(p.Source, ": tool_sets["); i >= 0 {
			file, entry = p.Source[:i], p.Source[i+2:]
		}
		pins[base] = runtime.ToolsetPin{SHA256: p.SHA256, FirstUse: p.FirstUse, File: file, Entry: entry}
	}
	return pins
}

// serve runs the runtime until ctx ends. ready, when not nil, is called
// once the HTTP server accepts connections.
func serve(ctx context.Context, s config.Settings, stdout, stderr io.Writer, ready func(*server)) error {
	level, _ := config.ParseLogLevel(s.LogLevel)
	return serveLogged(ctx, s, newLoggerAt(stderr, level, "text"), stdout, ready)
}

// serveLogged is serve with the logger of --log-level and --log-format.
func serveLogged(ctx context.Context, s config.Settings, log *slog.Logger, stdout io.Writer, ready func(*server)) error {
	// Traces, when an OTEL_* variable asks for them (docs/observability.md).
	tracerProvider, log, stopTracing, err := startTracing(ctx, "gorap", log) // tracing.go
	if err != nil {
		return err
	}
	defer stopTracing()

	// HTTPS: a certificate or key that does not load stops serve before
	// anything else starts.
	var tlsConfig *tls.Config
	if s.TLSCert != "" {
		var err error
		if tlsConfig, err = serveTLSConfig(s.TLSCert, s.TLSKey, log); err != nil {
			return err
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("find the working directory for the project-level config: %w", err)
	}
	toolSets, used, err := s.LoadToolSets(dir, getenvOS)
	if err != nil {
		return err
	}
	toolServers := toolSets.ServerURLs()
	// The registry of /metrics: the runtime's metrics, the Go process's,
	// and those of the bridges served in process.
	reg, met, err := newServeMetrics(log) // serve_metrics.go
	if err != nil {
		return err
	}
	bridgeReg := inProcessBridgeMetrics(reg, log)
	// Bridged entries are served in process (no port): otc_server, tools_json
	// and the MCP entries below.
	hosts := inProcessHosts{}
	otcURLs, stopOTC, err := startOTCBridges(ctx, &s, dir, hosts, tracerProvider, bridgeReg, log)
	if err != nil {
		return err
	}
	defer stopOTC()
	toolServers = append(toolServers, otcURLs...)
	tjURLs, stopToolsJSON, err := startToolsJSONEntries(ctx, s, dir, hosts, tracerProvider, bridgeReg, log, stdout)
	if err != nil {
		return err
	}
	defer stopToolsJSON()
	toolServers = append(toolServers, tjURLs...)
	// toolset_command entries, supervised child
	// processes served under stable in-process names (serve_command.go).
	cmds := startCommandServers(ctx, &s, dir, hosts, s.ToolToken, log, stdout)
	defer cmds.shutdown()
	toolServers = append(toolServers, cmds.urls...)
	spec, err := parseModelSpec(s.Model, getenvOS)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	mdl, err := newModel(spec, nil)
	if err != nil {
		return err
	}
	// mcp_server and http_mcp_server entries, bridged in process;
	// the runtime's model answers their sampling requests.
	mcpb := startMCPBridges(ctx, &s, dir, mdl, tracerProvider, bridgeReg, log, stdout)
	defer mcpb.shutdown()
	toolServers = append(toolServers, mcpb.urls...)
	for host, b := range mcpb.byHost {
		hosts[host] = b
	}

	if err := privfile.MkdirAll(s.DataDir); err != nil {
		return fmt.Errorf("create data dir %s: %w (pass --data-dir DIR to use another)", s.DataDir, err)
	}
	st, secret, storeLabel, err := openServeStore(ctx, s)
	if err != nil {
		return err
	}
	defer st.Close()

	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pass --listen ADDR to use another address)", s.Listen, err)
	}
	defer ln.Close()
	if err := checkListenAuth(ln.Addr(), s); err != nil {
		return err
	}
	publicURL, err := s.PublicURLFor(ln.Addr().String())
	if err != nil {
		return err
	}

	var hc *http.Client
	if s.ToolToken != "" {
		hc = &http.Client{Transport: bearer.Transport(s.ToolToken, runtime.NewTransport())}
	}
	hc = hosts.client(hc) // reaches the bridges served in process
	// The client API's tokens: the runtime's handler puts the API behind
	// them (without any, it answers this machine only, or everyone with
	// --insecure).
	var clientAuth func(http.Handler) http.Handler
	var auth *clientauth.Authenticator
	if s.Token != "" || s.TokensFile != "" {
		var err error
		if auth, err = clientauth.New(s.Token, s.TokensFile, log); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		defer auth.Close()
		clientAuth = auth.Handler
	}
	remotes, err := runtimeRemotes(toolSets)
	if err != nil {
		return err
	}
	var metricsURL string
	if s.MetricsListen != "" {
		var stopMetrics func(context.Context)
		if metricsURL, stopMetrics, err = listenMetrics(ctx, s.MetricsListen, reg, log); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			defer cancel()
			stopMetrics(sctx)
		}()
	}
	rt, err := runtime.New(&runtime.Config{
		Store:                     st,
		Model:                     mdl,
		ToolServers:               toolServers,
		ToolsetPins:               toolsetPins(toolSets),
		PublicURL:                 publicURL,
		Secret:                    secret,
		KeysFromStore:             true, // shared by every process of the store
		HTTPClient:                hc,
		Logger:                    log,
		System:                    s.System,
		DefaultToolTimeout:        s.ToolTimeout,
		MaxSubscriptionsPerThread: s.MaxSubscriptions,
		DefaultUserID:             s.UserID,
		ChoiceResponseHosts:       s.ChoiceResponseHosts,
		CallStatusAfter:           s.CallStatusAfter,
		LeaseTTL:                  s.LeaseTTL,
		SweepEvery:                s.SweepEvery,
		DisplayText:               displayText,
		ModelIdleTimeout:          s.ModelIdleTimeout,
		ModelTimeout:              s.ModelTimeout,
		ModelRetry:                runtime.ModelRetryPolicy{Initial: s.ModelRetryBackoff, Attempts: s.ModelAttempts},
		Secrets:                   knownSecrets(s),
		ConfirmDestructive:        confirmExternalActions(s, dir),
		AllowedHosts:              allowedHosts(s),
		AllowedOrigins:            s.AllowedOrigins,
		ClientAuth:                clientAuth,
		InsecureClientAPI:         s.Insecure,
		Retention:                 s.EffectiveRetention(toolSets),
		ContextWindow:             s.EffectiveContextWindow(toolSets),
		MaxResultShare:            s.EffectiveMaxResultShare(toolSets),
		Remotes:                   remotes,
		Compaction:                compactionConfig(s.Compaction),
		ToolsetBudgets:            toolsetBudgets(toolSets),
		SessionBudget:             sessionBudget(toolSets),
		Prices:                    toolSets.Prices,
		Metrics:                   met,
		MetricsHandler:            metrics.Handler(reg),
		TracerProvider:            tracerProvider,
	})
	if err != nil {
		return err
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}

	handler := rt.Handler()
	api := handler
	// The web UI at "/": static assets, no token; the
	// page sends the token on its API requests.
	handler = webui.WithAPI(handler, rt.WebGuard)
	// /metrics is the runtime's, behind the client token.
	handler = withMetricsRoute(handler, api)
	// Health and readiness probes, without the token.
	handler = rt.WithHealth(handler)
	// Read, write and idle timeouts, a header limit and a connection cap;
	// event streams set their own write deadlines.
	var limits rap.HTTPLimits
	srv := runtime.NewHTTPServer(handler, limits, log)
	srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	srv.TLSConfig = tlsConfig
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	serveErr := make(chan error, 1)
	go func() {
		lln := limits.Listener(ln, log)
		if srv.TLSConfig != nil {
			serveErr <- srv.ServeTLS(lln, "", "")
			return
		}
		serveErr <- srv.Serve(lln)
	}()

	listenURL, elsewhere := listenURLs(scheme, ln.Addr())
	info := &server{Runtime: rt, URL: listenURL, PublicURL: publicURL, Model: describeModel(mdl), HTTP: srv, MetricsURL: metricsURL}
	fmt.Fprintf(stdout, "rap serve: listening on %s\n", listenURL)
	if len(elsewhere) > 0 {
		fmt.Fprintf(stdout, "  from other machines: %s (listening on every address)\n", strings.Join(elsewhere, ", "))
	}
	fmt.Fprintf(stdout, "  model:        %s\n", info.Model)
	window, perResult := rt.ContextWindow()
	fmt.Fprintf(stdout, "  context:      %d tokens; a tool result is sent to the model with at most %d of them (--context-window, --max-result-share)\n", window, perResult)
	fmt.Fprintf(stdout, "  compaction:   %s (--compaction)\n", describeCompaction(rt))
	fmt.Fprintf(stdout, "  callbacks:    %s/rap/callback/…\n", publicURL)
	fmt.Fprintf(stdout, "  web UI:       %s/\n", listenURL)
	fmt.Fprintf(stdout, "  data dir:     %s\n", s.DataDir)
	fmt.Fprintf(stdout, "  store:        %s\n", storeLabel)
	fmt.Fprintf(stdout, "  metrics:      %s/metrics (behind the client API's token)\n", listenURL)
	if metricsURL != "" {
		fmt.Fprintf(stdout, "                %s WITHOUT a token (--metrics-listen: keep it on a private network)\n", metricsURL)
	}
	if s.StoreIsPostgres() {
		ttl, sweep := cmp.Or(s.LeaseTTL, runtime.DefaultLeaseTTL), cmp.Or(s.SweepEvery, runtime.DefaultSweepEvery)
		fmt.Fprintf(stdout, "  leases:       %v, swept every %v (a killed process's threads resume elsewhere within %v)\n", ttl, sweep, ttl+sweep)
	}
	if b := sessionBudget(toolSets); b != (runtime.SessionBudget{}) {
		fmt.Fprintf(stdout, "  budget:       %s per session (\"session_budget\" in rap.json)\n", describeSessionBudget(b))
	}
	if d := s.EffectiveRetention(toolSets); d > 0 {
		fmt.Fprintf(stdout, "  retention:    closed sessions are deleted %v after their last activity\n", d)
	}
	if len(used) == 0 {
		fmt.Fprintf(stdout, "  tool servers: none (no config file found; see docs/config.md)\n")
	} else {
		fmt.Fprintf(stdout, "  tool servers: %s (from %s)\n", orNone(strings.Join(toolServers, ", ")), strings.Join(used, ", "))
	}
	switch {
	case s.TokensFile != "":
		fmt.Fprintf(stdout, "  client API:   requires a bearer token: %d from %s (read again when it changes)", auth.Tokens(), s.TokensFile)
		if s.Token != "" {
			fmt.Fprintf(stdout, ", and the admin token from %s", config.EnvToken)
		}
		fmt.Fprintln(stdout)
	case s.Token != "":
		fmt.Fprintf(stdout, "  client API:   requires the bearer token from %s\n", config.EnvToken)
	case s.Insecure:
		fmt.Fprintf(stdout, "  client API:   NO AUTHENTICATION (--insecure): anyone who reaches %s can read and drive every conversation\n", listenURL)
		log.Warn("the client API has no token and listens beyond loopback (--insecure)", "listen", listenURL)
	}
	fmt.Fprintf(stdout, "Talk to it with: rap chat --server %s\n", listenURL)
	log.Info("serving", "settings", s, "tool_servers", toolServers, "config_files", used)
	if ready != nil {
		ready(info)
	}

	var result error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case err := <-serveErr:
		result = fmt.Errorf("HTTP server on %s stopped: %w", listenURL, err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// The runtime first: it ends the event streams, so that the HTTP
	// server's Shutdown does not wait for them.
	if err := rt.Shutdown(sctx); err != nil {
		log.Warn("runtime shutdown", "err", err)
	}
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("HTTP server shutdown", "err", err)
		srv.Close()
	}
	return result
}

// allowedHosts are the host names the client API and the web UI answer
// to besides loopback names, IP addresses and the public URL's host: the
// configured ones and the listen address's host when it is a name.
func allowedHosts(s config.Settings) []string {
	hosts := append([]string(nil), s.AllowedHosts...)
	if h, _, err := net.SplitHostPort(s.Listen); err == nil && h != "" && net.ParseIP(h) == nil {
		hosts = append(hosts, h)
	}
	return hosts
}

// requireToken protects the client API with one admin bearer token (see
// package clientauth). The callback endpoint stays open: each callback URL
// carries its own unguessable token.
func requireToken(next http.Handler, token string) http.Handler {
	auth, err := clientauth.New(token, "", nil)
	if err != nil {
		panic(err) // token is not empty
	}
	return auth.Handler(next)
}

// checkListenAuth refuses to serve the client API beyond loopback without a
// token, unless --insecure says so explicitly: the API
// reads and drives every conversation of the runtime.
func checkListenAuth(addr net.Addr, s config.Settings) error {
	if s.Token != "" || s.TokensFile != "" || s.Insecure {
		return nil
	}
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: refusing to listen on %s without a client token: anyone who can reach it could read and drive every conversation. "+
		"Set %s to a long random secret (for example: export %s=$(openssl rand -hex 32)) and give clients the same value "+
		"(rap chat reads %s); or listen on loopback only (--listen 127.0.0.1:8080); or pass --insecure if the network is trusted",
		errUsage, addr, config.EnvToken, config.EnvToken, config.EnvToken)
}

// displayRenderTimeout bounds one display script evaluation (RAP DS-3).
const displayRenderTimeout = 50 * time.Millisecond

// displayText renders a tool call for people with the tool's display
// script, falling back to the default rendering (RAP DS-2).
func displayText(toolName, script string, args json.RawMessage) string {
	ctx, cancel := context.WithTimeout(context.Background(), displayRenderTimeout)
	defer cancel()
	return display.Render(ctx, toolName, script, args)
}

// knownSecrets are the secrets the runtime masks in the model errors it
// logs and relays to clients: the client and tool
// tokens and the model providers' API keys.
func knownSecrets(s config.Settings) []string {
	return []string{s.Token, s.ToolToken, getenvOS("ANTHROPIC_API_KEY"), getenvOS("OPENAI_API_KEY")}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// runtimeRemotes are the config files' remotes with their tokens read
// from the environment.
func runtimeRemotes(f *config.File) (map[string]runtime.Remote, error) {
	resolved, err := f.ResolveRemotes(getenvOS)
	if err != nil {
		return nil, err
	}
	out := make(map[string]runtime.Remote, len(resolved))
	for n, r := range resolved {
		out[n] = runtime.Remote{URL: r.URL, Token: r.Token}
	}
	return out, nil
}

// sessionBudget is the config files' "session_budget"; the zero value
// when they set none.
func sessionBudget(f *config.File) runtime.SessionBudget {
	if f == nil || f.SessionBudget == nil {
		return runtime.SessionBudget{}
	}
	return runtime.SessionBudget{Tokens: f.SessionBudget.Tokens, USD: f.SessionBudget.USD}
}

// describeSessionBudget says a session budget's limits: "2000000
// tokens, $5.00".
func describeSessionBudget(b runtime.SessionBudget) string {
	var parts []string
	if b.Tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", b.Tokens))
	}
	if b.USD > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f", b.USD))
	}
	return strings.Join(parts, ", ")
}

// toolsetBudgets are the budgets of the toolset_server entries, by base
// URL.
func toolsetBudgets(f *config.File) map[string]runtime.ToolBudget {
	if f == nil {
		return nil
	}
	out := map[string]runtime.ToolBudget{}
	for _, ts := range f.ToolSets {
		if ts.Type == config.TypeToolsetServer && ts.Budget != nil {
			out[ts.ServerURL] = runtime.ToolBudget{Tokens: ts.Budget.Tokens, USD: ts.Budget.USD}
		}
	}
	return out
}

// compactionConfig is the runtime's compaction setting for a --compaction
// mode (config.ParseCompaction).
func compactionConfig(mode string) runtime.CompactionConfig {
	switch mode {
	case config.CompactionOff:
		return runtime.CompactionConfig{Off: true}
	case config.CompactionGorap:
		return runtime.CompactionConfig{Mode: runtime.CompactionGorap}
	case config.CompactionProvider:
		return runtime.CompactionConfig{Mode: runtime.CompactionProvider}
	}
	return runtime.CompactionConfig{Mode: runtime.CompactionAuto}
}

// describeCompaction is the line rap serve prints about compaction.
func describeCompaction(rt *runtime.Runtime) string {
	switch who, at := rt.CompactionInUse(); who {
	case "provider":
		return fmt.Sprintf("by the model's provider, once a request passes %d input tokens", at)
	case "gorap":
		return fmt.Sprintf("by gorap, with the model, once a request passes about %d tokens", at)
	}
	return "off: every request carries the whole history"
}
