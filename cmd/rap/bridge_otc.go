package main

// "rap bridge otc" and the otc_server entries of rap serve.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorap/gorap/bridge/otc"
	"github.com/gorap/gorap/internal/privfile"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
	"github.com/gorap/gorap/runtime/config"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"
)

// otcFlags are the settings shared by "rap bridge otc" and otc_server
// entries.
type otcFlags struct {
	name, dialect, secretEnv, secretFile, secretsDir string
	noAuth                                           bool
	callTimeout, authTimeout                         time.Duration
	// metricsListen is --metrics-listen; metrics the registry the
	// bridge's tool server counts on (nil: none).
	metricsListen string
	metrics       prometheus.Registerer
	// tracer is the tracer provider of the OTEL_* variables (nil: none).
	tracer trace.TracerProvider
}

// newOTCBridge builds a bridge from its settings; the worker secret is read
// from the environment or a file, never from a flag value. A store keeps
// its calls and callbacks across restarts; nil keeps them in memory.
func newOTCBridge(ctx context.Context, url string, f otcFlags, bearer string, store rap.Store, log *slog.Logger) (*otc.Bridge, error) {
	c := &otc.Client{BaseURL: strings.TrimRight(url, "/"), Dialect: otc.Dialect(f.dialect)}
	if !f.noAuth {
		secret, err := otc.LoadWorkerSecret(f.secretEnv, f.secretFile)
		if err != nil {
			return nil, fmt.Errorf("%w (or pass --no-auth for a worker that runs without authentication)", err)
		}
		c.Secret = secret
	}
	return otc.New(ctx, &otc.Options{
		Name:        f.name,
		Client:      c,
		Secrets:     otc.EnvFileSecrets{Dir: f.secretsDir},
		CallTimeout: f.callTimeout,
		AuthTimeout: f.authTimeout,
		Logger:      log,
		Server:      &rap.ServerOptions{BearerToken: bearer, Logger: log, Metrics: f.metrics, Store: store, TracerProvider: f.tracer},
	})
}

// openOTCStore opens the durable store of the bridge name in dir,
// DIR/NAME.db, creating dir (0700; the file is 0600).
func openOTCStore(dir, name string) (*durable.Store, error) {
	if err := privfile.MkdirAll(dir); err != nil {
		return nil, err
	}
	st, err := durable.Open(filepath.Join(dir, name+".db"))
	if err != nil {
		return nil, fmt.Errorf("opening the bridge's store: %w", err)
	}
	return st, nil
}

func newBridgeOTCCmd(a *app) *cobra.Command {
	var f otcFlags
	var listen, token, dataDir string
	cmd := &cobra.Command{
		Use:   "otc [flags] WORKER_URL",
		Short: "serve an Open Tool Calling worker (Arcade worker protocol or OXP 1.0) as a RAP tool server",
		Long: `Serves the tools of an Open Tool Calling worker (the Arcade worker protocol or
OXP 1.0) as a RAP tool server. The worker secret that signs the worker JWT
is read from an environment variable (--secret-env) or a file
(--secret-file), never from a flag value. See docs/otc.md.`,
		Example: `  ARCADE_WORKER_SECRET=... rap bridge otc http://127.0.0.1:8002
  rap bridge otc --no-auth --dialect oxp --listen 127.0.0.1:3005 http://127.0.0.1:8080`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("want exactly one WORKER_URL, got %d arguments", len(args))
			}
			return runBridgeOTC(cmd.Context(), a, f, listen, token, dataDir, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&listen, "listen", "127.0.0.1:3001", "`ADDR` the RAP tool server listens on")
	fs.StringVar(&f.name, "name", "otc", "RAP toolset `NAME`")
	fs.StringVar(&f.dialect, "dialect", "", "`DIALECT` \"arcade\" or \"oxp\" (default: detect from the health route that answers)")
	fs.StringVar(&f.secretEnv, "secret-env", otc.DefaultSecretEnv, "environment `VARIABLE` holding the worker secret that signs the worker JWT")
	fs.StringVar(&f.secretFile, "secret-file", "", "`FILE` holding the worker secret instead (must not be readable by other users)")
	fs.BoolVar(&f.noAuth, "no-auth", false, "send no worker JWT (for workers run with authentication disabled)")
	fs.StringVar(&f.secretsDir, "secrets-dir", "", "`DIR` with one file per tool secret (tool secrets are otherwise read from environment variables of the same name)")
	fs.DurationVar(&f.callTimeout, "call-timeout", otc.DefaultCallTimeout, "give up on a worker call after this long (the RAP call ends with an Error: result)")
	fs.DurationVar(&f.authTimeout, "auth-timeout", otc.DefaultAuthTimeout, "give up waiting for a user authorization after this long")
	addToolTokenFlag(fs, &token, "bearer `TOKEN` the RAP runtime must send (empty: none)")
	addMetricsListenFlag(fs, &f.metricsListen)
	fs.StringVar(&dataDir, "data-dir", "", "`DIR` of a durable store (DIR/NAME.db) so that calls in progress and undelivered callbacks survive a restart (default: in memory)")
	return cmd
}

func runBridgeOTC(ctx context.Context, a *app, f otcFlags, listen, token, dataDir, worker string) error {
	stdout, log, pos := a.stdout, a.log, []string{worker}
	reg, stopMetrics, err := bridgeMetrics(ctx, "otc", f.metricsListen, stdout, log) // bridge_metrics.go
	if err != nil {
		return err
	}
	defer stopMetrics()
	f.metrics = reg
	tp, log, stopTracing, err := startTracing(ctx, "gorap-bridge-otc", log) // tracing.go
	if err != nil {
		return err
	}
	defer stopTracing()
	f.tracer = tp
	var store rap.Store
	if dataDir != "" {
		st, err := openOTCStore(dataDir, f.name)
		if err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
		defer st.Close()
		store = st
	}
	b, err := newOTCBridge(ctx, pos[0], f, token, store, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (pass --listen ADDR to use another address)", listen, err)
	}
	url, _ := listenURLs("http", ln.Addr())
	fmt.Fprintf(stdout, "rap bridge otc: serving %s of the %s worker at %s on %s\n", plural(len(b.Tools()), "tool"), b.Dialect(), pos[0], url)
	for _, p := range b.Problems() {
		fmt.Fprintf(stdout, "  left out %s: %v\n", p.Tool, p.Err)
	}
	return b.Server().Serve(ctx, ln)
}

// startOTCBridges starts one bridge per otc_server entry of the merged tool
// configuration, served in process at NAME.otc.rap.invalid (see
// inProcessHosts), and returns their base URLs for the runtime's tool
// servers and a function that stops them. With a data dir, each bridge
// keeps its calls and callbacks in DATADIR/otc/NAME.db.
func startOTCBridges(ctx context.Context, s *config.Settings, dir string, hosts inProcessHosts, tp trace.TracerProvider, reg prometheus.Registerer, log *slog.Logger) ([]string, func(), error) {
	f, _, err := s.LoadToolSets(dir, getenvOS)
	if err != nil || f == nil {
		return nil, func() {}, err
	}
	var urls []string
	var bridges []*otc.Bridge
	var stores []*durable.Store
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, b := range bridges {
			_ = b.Server().Shutdown(sctx)
		}
		for _, st := range stores {
			_ = st.Close()
		}
	}
	for _, o := range f.OTCServers() {
		fl := otcFlags{name: o.Name, dialect: o.Dialect, secretEnv: o.SecretEnv, secretFile: o.SecretFile,
			noAuth: o.NoAuth, secretsDir: o.SecretsDir, callTimeout: time.Duration(o.CallTimeout), authTimeout: time.Duration(o.AuthTimeout), tracer: tp, metrics: reg}
		var store rap.Store
		if s.DataDir != "" {
			st, err := openOTCStore(filepath.Join(s.DataDir, "otc"), o.Name)
			if err != nil {
				stop()
				return nil, func() {}, fmt.Errorf("otc_server %q (%s): %w", o.Name, o.URL, err)
			}
			stores = append(stores, st)
			store = st
		}
		b, err := newOTCBridge(ctx, o.URL, fl, s.ToolToken, store, log.With("otc_server", o.Name))
		if err != nil {
			stop()
			return nil, func() {}, fmt.Errorf("otc_server %q (%s): %w", o.Name, o.URL, err)
		}
		if err := b.Server().Start(ctx); err != nil {
			stop()
			return nil, func() {}, err
		}
		bridges = append(bridges, b)
		urls = append(urls, hosts.add("otc", o.Name, b.Server()))
		log.Info("otc_server bridged", "name", o.Name, "worker", o.URL, "dialect", string(b.Dialect()), "tools", len(b.Tools()), "at", urls[len(urls)-1])
	}
	return urls, stop, nil
}
