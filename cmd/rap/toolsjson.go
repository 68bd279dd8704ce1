package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/gorap/gorap/bridge/toolsjson"
	"github.com/gorap/gorap/internal/privfile"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/config"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"
)

// This file holds what "rap bridge toolsjson", "rap replay", "rap serve"
// (tools_json entries) and "rap validate" share for tools.json bundles,
// and the "rap toolsjson" verb.

// toolsJSONFlags are the flags of the verbs that serve a bundle.
type toolsJSONFlags struct {
	allowUnsigned bool
	noConfirm     bool
	secretsFile   string
	secretCommand string
	secretPrefix  string
	dataDir       string
	token         string
	timeout       time.Duration
	// metrics is the registry the tool server counts on (nil: none);
	// rap bridge toolsjson sets it from --metrics-listen.
	metrics prometheus.Registerer
	// tracer is the tracer provider of the OTEL_* variables (nil: none).
	tracer trace.TracerProvider
}

func (f *toolsJSONFlags) register(fs *pflag.FlagSet, getenv func(string) string) {
	fs.BoolVar(&f.allowUnsigned, "allow-unsigned", false, "DEVELOPMENT ONLY: serve a bundle whose tools.json digest is missing from or differs from manifest.toml")
	fs.BoolVar(&f.noConfirm, "no-confirm", false, "run requires_confirmation tools without asking the user (security.confirm_external_actions = false)")
	fs.StringVar(&f.secretsFile, "secrets-file", "", "`FILE` of \"ID = VALUE\" secret lines, mode 600")
	fs.StringVar(&f.secretCommand, "secret-command", "", "`PROGRAM` run with a secret id as its last argument; its output is the value")
	fs.StringVar(&f.secretPrefix, "secret-env-prefix", "", "`PREFIX` of the environment variables secrets are read from (PREFIX + ID upper-cased, non-alphanumerics as _)")
	fs.StringVar(&f.dataDir, "data-dir", config.DefaultDataDir(getenv), "`DIR` for traces (DIR/toolsjson/traces) and the audit log (DIR/toolsjson/audit.jsonl)")
	addToolTokenFlag(fs, &f.token, "bearer `TOKEN` the runtime must send")
	fs.DurationVar(&f.timeout, "timeout", toolsjson.DefaultTimeout, "bound of one tool call without a timeout_ms of its own")
}

// resolver builds the secret resolver chain: the environment, then the
// secrets file, then the secret command.
func (f *toolsJSONFlags) resolver() toolsjson.SecretResolver {
	chain := toolsjson.ChainResolver{toolsjson.EnvResolver{Prefix: f.secretPrefix}}
	if f.secretsFile != "" {
		chain = append(chain, toolsjson.FileResolver{Path: f.secretsFile})
	}
	if f.secretCommand != "" {
		chain = append(chain, toolsjson.CommandResolver{Command: f.secretCommand})
	}
	return chain
}

// toolsJSONServer loads a bundle and builds its server, with traces and
// audit records under dataDir. close releases the audit and trace files.
func toolsJSONServer(bundle string, f toolsJSONFlags, log *slog.Logger, replay *toolsjson.Replay, out io.Writer) (*toolsjson.Server, *toolsjson.Bundle, func(), error) {
	b, err := toolsjson.Load(bundle, &toolsjson.LoadOptions{AllowUnsigned: f.allowUnsigned})
	if err != nil {
		return nil, nil, nil, err
	}
	for _, w := range b.Warnings {
		fmt.Fprintf(out, "WARNING: %s\n", w)
	}
	for _, d := range b.Denied {
		fmt.Fprintf(out, "denied: tool %q is not served: capability %q (%s) is not granted by policy.caps\n", d.ToolID, d.Capability, d.Path)
	}
	dir := filepath.Join(f.dataDir, "toolsjson")
	if err := privfile.MkdirAll(dir); err != nil {
		return nil, nil, nil, fmt.Errorf("create %s: %w (pass --data-dir DIR to use another)", dir, err)
	}
	audit, err := os.OpenFile(filepath.Join(dir, "audit.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open the audit log: %w", err)
	}
	opts := &toolsjson.Options{
		Secrets:   f.resolver(),
		Audit:     audit,
		TraceDir:  filepath.Join(dir, "traces"),
		Logger:    log,
		Timeout:   f.timeout,
		NoConfirm: f.noConfirm,
		Replay:    replay,
		Server:    &rap.ServerOptions{BearerToken: f.token, Logger: log, Metrics: f.metrics, TracerProvider: f.tracer},
	}
	s, err := toolsjson.NewServer(b, opts)
	if err != nil {
		audit.Close()
		return nil, nil, nil, err
	}
	return s, b, func() { s.Close(); audit.Close() }, nil
}

// serveToolsJSON serves s on ln until ctx ends.
func serveToolsJSON(ctx context.Context, s *toolsjson.Server, ln net.Listener) error {
	err := s.Serve(ctx, ln)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// startToolsJSONEntries starts a tool server for each tools_json entry
// of the config, served in process at
// NAME.toolsjson.rap.invalid (see inProcessHosts), and returns their base
// URLs. stop shuts them down.
func startToolsJSONEntries(ctx context.Context, st config.Settings, dir string, hosts inProcessHosts, tp trace.TracerProvider, reg prometheus.Registerer, log *slog.Logger, out io.Writer) (urls []string, stop func(), err error) {
	f, _, err := st.LoadToolSets(dir, getenvOS)
	if err != nil {
		return nil, func() {}, err
	}
	entries := f.ToolsJSONEntries()
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, e := range entries {
		flags := toolsJSONFlags{allowUnsigned: e.AllowUnsigned, noConfirm: !f.ConfirmExternalActions(), dataDir: st.DataDir, token: st.ToolToken, timeout: toolsjson.DefaultTimeout, tracer: tp, metrics: reg}
		s, _, closeFn, err := toolsJSONServer(e.Bundle, flags, log.With("bundle", e.Bundle), nil, out)
		if err != nil {
			stop()
			return nil, func() {}, fmt.Errorf("%s: %w", e.Source, err)
		}
		if err := s.Start(context.WithoutCancel(ctx)); err != nil {
			closeFn()
			stop()
			return nil, func() {}, fmt.Errorf("%s: start the bundle's tool server: %w", e.Source, err)
		}
		stops = append(stops, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Shutdown(sctx)
			closeFn()
		})
		u := hosts.add("toolsjson", filepath.Base(filepath.Clean(e.Bundle)), s)
		urls = append(urls, u)
		fmt.Fprintf(out, "  tools.json:   %s served in process at %s (traces in %s)\n", e.Bundle, u, filepath.Dir(s.TracePath()))
	}
	return urls, stop, nil
}

// toolsJSONInit writes an empty tools.json in dir and pins its digest.
func toolsJSONInit(dir string, stdout io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := filepath.Join(dir, toolsjson.ToolsFile)
	if _, err := os.Stat(p); err == nil {
		return fmt.Errorf("%s already exists; use 'rap toolsjson digest %s' to re-pin it", p, dir)
	}
	if err := os.WriteFile(p, []byte("{\n  \"version\": 1,\n  \"tools\": []\n}\n"), 0o644); err != nil {
		return err
	}
	if err := toolsjson.PinDigest(dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (version 1, no tools) and pinned its BLAKE3 digest in %s\n", p, filepath.Join(dir, toolsjson.ManifestFile))
	return nil
}

// toolsJSONDigest re-pins the digest of dir/tools.json in its manifest.
func toolsJSONDigest(dir string, stdout io.Writer) error {
	if err := toolsjson.PinDigest(dir); err != nil {
		return err
	}
	data, _ := os.ReadFile(filepath.Join(dir, toolsjson.ToolsFile))
	fmt.Fprintf(stdout, "pinned tools.json BLAKE3 %s in %s\n", toolsjson.Digest(data), filepath.Join(dir, toolsjson.ManifestFile))
	return nil
}

// isToolsJSON reports whether a "rap validate" argument is a tools.json
// bundle: a directory, or a file named tools.json.
func isToolsJSON(src string) bool {
	if filepath.Base(src) == toolsjson.ToolsFile {
		return true
	}
	fi, err := os.Stat(src)
	return err == nil && fi.IsDir()
}

// validateToolsJSON prints every violation of a bundle, then its warnings;
// it exits 1 when there is any violation.
func validateToolsJSON(src string, allowUnsigned bool, stdout io.Writer) error {
	vs, ws, err := toolsjson.Validate(src, &toolsjson.LoadOptions{AllowUnsigned: allowUnsigned})
	if err != nil {
		return err
	}
	for _, v := range vs {
		fmt.Fprintf(stdout, "error: %s\n", v)
	}
	for _, w := range ws {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
	if len(vs) > 0 {
		fmt.Fprintf(stdout, "FAIL: bundle %s has %s; nothing of a refused bundle is served, and a tool with a capability not granted is not served\n", src, plural(len(vs), "violation"))
		return exitError{1}
	}
	fmt.Fprintf(stdout, "OK: bundle %s is valid\n", src)
	return nil
}

// confirmExternalActions reads security.confirm_external_actions from the
// config files (default true); a config that cannot be read was already
// reported by the caller, so it counts as the default.
func confirmExternalActions(st config.Settings, dir string) bool {
	f, _, err := st.LoadToolSets(dir, getenvOS)
	if err != nil {
		return true
	}
	return f.ConfirmExternalActions()
}
