package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gorap/gorap/examples/exec"
	"github.com/gorap/gorap/examples/fswatch"
	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
	"github.com/gorap/gorap/runtime/config"
)

func init() {
	register(&command{
		name:    "example",
		summary: "run an example tool server: get-time, exec or fswatch",
		usage:   "rap example NAME [--listen ADDR] [--token T] [--data-dir DIR] [--public-url URL] [--log-level LEVEL]",
		run:     runExample,
	})
}

// examples are the tool servers "rap example" runs, by name.
var examples = map[string]struct {
	about string
	build func(*rap.ServerOptions) *rap.Server
}{
	"get-time": {"the current time, time zones and a clock subscription", gettime.New},
	"exec":     {"run_command: runs programs and streams their output (DANGEROUS: runs anything)", exec.New},
	"fswatch":  {"watch_directory: a subscription to file changes under a directory", fswatch.New},
}

// exampleShutdownGrace bounds a graceful stop of "rap example".
const exampleShutdownGrace = 10 * time.Second

// execWarning is printed whenever the exec example starts.
const execWarning = `WARNING: the exec example runs ANY program a caller names, as your user.
Anyone who can reach it can run code on this machine. Keep it on a
loopback address, set --token (or $` + envToolToken + `), and stop it when done.
`

func runExample(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := commands["example"]
	fs := newFlagSet(c, stderr)
	listen := fs.String("listen", "127.0.0.1:3001", "address to listen on (port 0 picks a free port)")
	token := fs.String("token", "", "bearer token every invocation must carry (default $"+envToolToken+"; none when both are empty)")
	dataDir := fs.String("data-dir", "", "directory for a SQLite store of undelivered callbacks and subscriptions, so they survive a restart (default: in memory)")
	publicURL := fs.String("public-url", "", "base URL runtimes reach this server at, when it differs from the listen address")
	logLevel := fs.String("log-level", "info", "least severe log level shown on standard error: debug, info, warn or error")
	oxp := fs.Bool("oxp", false, "also answer the OXP 1.0 routes (GET /health, GET /tools, POST /tools/call) for synchronous OXP clients; see docs/otc.md")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n\nRuns an example RAP tool server until interrupted (Ctrl-C stops it gracefully).\nIt prints the base URL to give a runtime ('rap invoke', or a tool_sets entry).\nWith RAP_EMBEDDED set (a toolset_command entry), it listens on a free loopback port\nunless --listen is given, and prints {\"port\": N} as its first line.\n\nExamples:\n", c.usage)
		for _, n := range exampleNames() {
			fmt.Fprintf(stderr, "  %-8s %s\n", n, examples[n].about)
		}
		fmt.Fprint(stderr, "\nFlags:\n")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want one example name (%s)", errUsage, strings.Join(exampleNames(), ", "))
	}
	name := pos[0]
	if name == "gettime" { // the package's name, accepted as an alias
		name = "get-time"
	}
	ex, ok := examples[name]
	if !ok {
		return fmt.Errorf("%w: unknown example %q; choose one of %s", errUsage, name, strings.Join(exampleNames(), ", "))
	}
	if *token == "" {
		*token = os.Getenv(envToolToken)
	}
	if name == "exec" {
		fmt.Fprint(stderr, execWarning)
		if !loopbackAddr(*listen) && *token == "" {
			return fmt.Errorf("%w: refusing to serve the exec example on %s, which is not a loopback address, without --token", errUsage, *listen)
		}
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("%w: --log-level %q: want debug, info, warn or error", errUsage, *logLevel)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	opts := &rap.ServerOptions{Logger: log, BearerToken: *token, PublicURL: *publicURL}
	opts.OXP = *oxp // issue 13 item 6
	if *dataDir != "" {
		if err := os.MkdirAll(*dataDir, 0o700); err != nil {
			return fmt.Errorf("creating --data-dir: %w", err)
		}
		store, err := durable.Open(filepath.Join(*dataDir, name+".db"))
		if err != nil {
			return fmt.Errorf("opening the store in --data-dir %s: %w", *dataDir, err)
		}
		defer store.Close()
		opts.Store = store
	}
	srv := ex.build(opts)

	// issue 10 item 2: run by a runtime's toolset_command entry
	// (RAP_EMBEDDED set), pick a free loopback port unless --listen says
	// otherwise, and report it on the first line (see embeddedListen).
	embedded := os.Getenv(config.EnvEmbedded) != ""
	if embedded && !flagSet(fs, "listen") {
		*listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w; choose another address with --listen (port 0 picks a free one)", *listen, err)
	}
	if err := srv.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	// The SDK's connection limits: timeouts, header size, connection cap.
	hs := rap.NewHTTPServer(srv, rap.HTTPLimits{}, opts.Logger)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(rap.LimitListener(ln, rap.DefaultMaxConns, opts.Logger)) }()

	base := "http://" + ln.Addr().String()
	if embedded {
		fmt.Fprintf(stdout, "{\"port\": %d}\n", ln.Addr().(*net.TCPAddr).Port)
	}
	fmt.Fprintf(stdout, "%s tool server listening on %s\n", name, base)
	fmt.Fprintf(stdout, "  manifest: %s%s\n", base, rap.WellKnownPath)
	fmt.Fprintf(stdout, "  try:      rap invoke %s %s\n", base, tryCall(name))
	if *token != "" {
		fmt.Fprintln(stdout, "  invocations need the bearer token")
	}

	var serveErr error
	select {
	case <-ctx.Done():
		fmt.Fprintln(stderr, "rap example: stopping")
	case serveErr = <-served:
	}
	sctx, cancel := context.WithTimeout(context.Background(), exampleShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", serveErr)
	}
	return nil
}

func exampleNames() []string {
	names := make([]string, 0, len(examples))
	for n := range examples {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// tryCall is a sample "rap invoke" tail for each example.
func tryCall(name string) string {
	switch name {
	case "exec":
		return `run_command '{"command":["echo","hello"]}' --wait 10s`
	case "fswatch":
		return `watch_directory '{"path":"."}' --wait 1m`
	default:
		return `get_time_in_zone '{"timezone":"Europe/Paris"}'`
	}
}

// loopbackAddr reports whether a listen address binds only to loopback.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
