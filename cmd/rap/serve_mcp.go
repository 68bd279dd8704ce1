package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/gorap/gorap/bridge/mcp"
	"github.com/gorap/gorap/internal/privfile"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
	"github.com/gorap/gorap/runtime/config"
	"github.com/prometheus/client_golang/prometheus"
)

// mcpBridgeHostSuffix names the in-process bridges: the runtime reaches
// the bridge of MCP server NAME at http://NAME.mcp.rap.invalid (see
// inProcessHosts). No port is opened for it.
const mcpBridgeHostSuffix = ".mcp.rap.invalid"

// mcpBridges are the in-process bridges "rap serve" runs for the config's
// mcp_server and http_mcp_server entries (RAP CF-1).
type mcpBridges struct {
	byHost map[string]*mcp.Bridge
	urls   []string
	stores []*durable.Store // closed after the bridges stop
}

// startMCPBridges starts a bridge for each MCP entry of the tool-server
// config, in parallel; sampler answers their sampling requests. An entry whose server cannot start is reported on
// stdout and in the log, and skipped; the others load.
func startMCPBridges(ctx context.Context, s *config.Settings, dir string, sampler model.Provider, tp trace.TracerProvider, reg prometheus.Registerer, log *slog.Logger, stdout io.Writer) *mcpBridges {
	m := &mcpBridges{byHost: map[string]*mcp.Bridge{}}
	f, _, err := s.LoadToolSets(dir, getenvOS)
	if err != nil || f == nil {
		return m // ToolServers already reported the config error
	}
	entries := f.MCPServers()
	started := make([]*mcp.Bridge, len(entries))
	stores := make([]*durable.Store, len(entries))
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() { started[i], stores[i], errs[i] = startMCPBridge(ctx, e, s.DataDir, sampler, tp, reg, log) })
	}
	wg.Wait()
	for i, e := range entries {
		if errs[i] != nil {
			log.Error("MCP server skipped", "name", e.MCP.Name, "entry", e.Source, "err", errs[i])
			fmt.Fprintf(stdout, "rap serve: MCP server %q (%s) skipped: %v\n", e.MCP.Name, e.Source, errs[i])
			continue
		}
		b := started[i]
		if stores[i] != nil {
			m.stores = append(m.stores, stores[i])
		}
		host := e.MCP.Name + mcpBridgeHostSuffix
		m.byHost[host] = b
		m.urls = append(m.urls, "http://"+host)
		n := len(b.Toolset("http://" + host + "/").Tools)
		fmt.Fprintf(stdout, "rap serve: MCP server %q bridged in process: %s\n", e.MCP.Name, plural(n, "tool"))
		for _, p := range b.Skipped() {
			fmt.Fprintf(stdout, "  %s\n", p)
		}
	}
	return m
}

// mcpEntryOptions are the bridge options a config entry sets directly;
// a zero call_timeout or startup_timeout leaves the bridge's default, and an entry without
// "prefix" prefixes its tools with its name and "_".
func mcpEntryOptions(c *config.MCPServer, sampler model.Provider, log *slog.Logger) *mcp.Options {
	opts := &mcp.Options{Name: c.Name, Command: c.Command, URL: c.URL, Headers: c.Headers, Mode: c.Mode, Prefix: c.ToolPrefix(), Logger: log, SamplingModel: sampler,
		CallTimeout: time.Duration(c.CallTimeout), ConnectTimeout: time.Duration(c.StartupTimeout)}
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		opts.Env = append(opts.Env, k+"="+c.Env[k])
	}
	return opts
}

// startMCPBridge starts the bridge of one config entry. With a data dir,
// the bridge keeps its callbacks and resource subscriptions in the
// durable store DATADIR/mcp/NAME.db, so that subscriptions survive a
// restart of rap serve.
func startMCPBridge(ctx context.Context, e config.ToolSet, dataDir string, sampler model.Provider, tp trace.TracerProvider, reg prometheus.Registerer, log *slog.Logger) (_ *mcp.Bridge, _ *durable.Store, err error) {
	c := e.MCP
	opts := mcpEntryOptions(c, sampler, log)
	if c.OAuth != nil {
		if opts.OAuth, err = mcpOAuthOptions(c.OAuth, dataDir); err != nil {
			return nil, nil, err
		}
	}
	var st *durable.Store
	if dataDir != "" {
		dir := filepath.Join(dataDir, "mcp")
		if err := privfile.MkdirAll(dir); err != nil {
			return nil, nil, fmt.Errorf("creating %s for the bridge's store: %w", dir, err)
		}
		if st, err = durable.Open(filepath.Join(dir, c.Name+".db")); err != nil {
			return nil, nil, fmt.Errorf("opening the bridge's store: %w", err)
		}
		defer func() {
			if err != nil {
				_ = st.Close()
			}
		}()
		opts.Server = &rap.ServerOptions{Store: st}
	}
	if tp != nil || reg != nil {
		if opts.Server == nil {
			opts.Server = &rap.ServerOptions{}
		}
		opts.Server.TracerProvider, opts.Server.Metrics = tp, reg
	}
	b, err := mcp.New(opts)
	if err != nil {
		return nil, nil, err
	}
	if err := b.Start(ctx); err != nil {
		return nil, nil, err
	}
	return b, st, nil
}

// shutdown stops every bridge and its MCP server.
func (m *mcpBridges) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, b := range m.byHost {
		wg.Go(func() { _ = b.Shutdown(ctx) })
	}
	wg.Wait()
	for _, st := range m.stores {
		_ = st.Close()
	}
}

// mcpOAuthOptions are the bridge's OAuth options for an http_mcp_server
// entry with "oauth": tokens in DATADIR/mcp-tokens,
// the redirect endpoint on a listener of the bridge's own, since the
// browser cannot reach the in-process bridge.
func mcpOAuthOptions(o *config.MCPOAuth, dataDir string) (*mcp.OAuthOptions, error) {
	if dataDir == "" {
		return nil, errors.New(`"oauth" needs a data dir to keep the users' tokens in; pass --data-dir`)
	}
	listen := o.Listen
	if listen == "" && o.RedirectURL != "" {
		u, err := url.Parse(o.RedirectURL)
		if err != nil || u.Port() == "" || !loopbackAddr(u.Host) {
			return nil, fmt.Errorf(`"oauth": redirect_url %q is not a loopback address with a port; set "listen" to the address that URL is forwarded to`, o.RedirectURL)
		}
		listen = u.Host
	}
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	return &mcp.OAuthOptions{TokenDir: filepath.Join(dataDir, "mcp-tokens"), RedirectURL: o.RedirectURL, CallbackListen: listen}, nil
}
