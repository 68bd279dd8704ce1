package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/gorap/gorap/bridge/mcp"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/config"
)

// mcpBridgeHostSuffix names the in-process bridges: the runtime reaches
// the bridge of MCP server NAME at http://NAME.mcp.rap.invalid (see
// inProcessHosts). No port is opened for it.
const mcpBridgeHostSuffix = ".mcp.rap.invalid"

// mcpBridges are the in-process bridges "rap serve" runs for the config's
// mcp_server and http_mcp_server entries (issue 10, RAP CF-1).
type mcpBridges struct {
	byHost map[string]*mcp.Bridge
	urls   []string
}

// startMCPBridges starts a bridge for each MCP entry of the tool-server
// config, in parallel; sampler answers their sampling requests. An entry whose server cannot start is reported on
// stdout and in the log, and skipped; the others load.
func startMCPBridges(ctx context.Context, s *config.Settings, dir string, sampler model.Provider, log *slog.Logger, stdout io.Writer) *mcpBridges {
	m := &mcpBridges{byHost: map[string]*mcp.Bridge{}}
	f, _, err := s.LoadToolSets(dir, getenvOS)
	if err != nil || f == nil {
		return m // ToolServers already reported the config error
	}
	entries := f.MCPServers()
	started := make([]*mcp.Bridge, len(entries))
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() { started[i], errs[i] = startMCPBridge(ctx, e, sampler, log) })
	}
	wg.Wait()
	for i, e := range entries {
		if errs[i] != nil {
			log.Error("MCP server skipped", "name", e.MCP.Name, "entry", e.Source, "err", errs[i])
			fmt.Fprintf(stdout, "rap serve: MCP server %q (%s) skipped: %v\n", e.MCP.Name, e.Source, errs[i])
			continue
		}
		b := started[i]
		host := e.MCP.Name + mcpBridgeHostSuffix
		m.byHost[host] = b
		m.urls = append(m.urls, "http://"+host)
		n := len(b.Toolset("http://" + host + "/").Tools)
		fmt.Fprintf(stdout, "rap serve: MCP server %q bridged in process: %d tools\n", e.MCP.Name, n)
		for _, p := range b.Skipped() {
			fmt.Fprintf(stdout, "  %s\n", p)
		}
	}
	return m
}

// startMCPBridge starts the bridge of one config entry.
func startMCPBridge(ctx context.Context, e config.ToolSet, sampler model.Provider, log *slog.Logger) (*mcp.Bridge, error) {
	c := e.MCP
	opts := mcp.Options{Name: c.Name, Command: c.Command, URL: c.URL, Headers: c.Headers, Mode: c.Mode, Prefix: c.Prefix, Logger: log, SamplingModel: sampler}
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		opts.Env = append(opts.Env, k+"="+c.Env[k])
	}
	b, err := mcp.New(opts)
	if err != nil {
		return nil, err
	}
	if err := b.Start(ctx); err != nil {
		return nil, err
	}
	return b, nil
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
}
