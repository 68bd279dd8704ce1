package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gorap/gorap/bridge/otc"
	"github.com/gorap/gorap/examples/exec"
	"github.com/gorap/gorap/examples/fswatch"
	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/examples/notes"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
	"github.com/gorap/gorap/runtime/config"
	"github.com/spf13/cobra"
)

// exampleServer is what "rap example" serves: a *rap.Server, or a server
// built around one.
type exampleServer interface {
	http.Handler
	Start(ctx context.Context) error
	Shutdown(ctx context.Context) error
}

// examples are the tool servers "rap example" runs, by name.
var examples = map[string]struct {
	about string
	build func(*rap.ServerOptions, exampleFlags) (exampleServer, error)
}{
	"get-time": {"the current time, time zones and a clock subscription", plainExample(gettime.New)},
	"exec":     {"run_command: runs programs and streams their output (DANGEROUS: runs anything)", plainExample(exec.New)},
	"fswatch":  {"watch_directory: a subscription to file changes under a directory", plainExample(fswatch.New)},
	"notes":    {"add_note, list_notes: notes per session that move with it to another runtime (needsMigration)", buildNotes},
}

// plainExample builds an example that needs only its server options.
func plainExample(build func(*rap.ServerOptions) *rap.Server) func(*rap.ServerOptions, exampleFlags) (exampleServer, error) {
	return func(opts *rap.ServerOptions, _ exampleFlags) (exampleServer, error) { return build(opts), nil }
}

// rapServer returns the *rap.Server of an example.
func rapServer(s exampleServer) *rap.Server {
	if n, ok := s.(*notes.Server); ok {
		return n.RAP()
	}
	return s.(*rap.Server)
}

// buildNotes builds the notes example on the directory runExample chose.
func buildNotes(opts *rap.ServerOptions, f exampleFlags) (exampleServer, error) {
	return notes.New(&notes.Options{Dir: f.notesDir, PeerToken: f.peerToken, Server: opts})
}

// envNotesPeerToken is the environment variable of --peer-token.
const envNotesPeerToken = "RAP_NOTES_PEER_TOKEN"

// exampleShutdownGrace bounds a graceful stop of "rap example".
const exampleShutdownGrace = 10 * time.Second

// execWarning is printed whenever the exec example starts.
const execWarning = `WARNING: the exec example runs ANY program a caller names, as your user.
Anyone who can reach it can run code on this machine. Keep it on a
loopback address, set --tool-token (or $` + envToolToken + `), and stop it when done.
`

// exampleFlags are the flags of "rap example".
type exampleFlags struct {
	listen, token, dataDir, publicURL string
	peerToken                         string
	oxp                               bool
	listenSet                         bool   // --listen was given
	peerTokenSet                      bool   // --peer-token was given
	notesDir                          string // where the notes example keeps its notes
}

func newExampleCmd(a *app) *cobra.Command {
	var f exampleFlags
	cmd := &cobra.Command{
		Use:   "example NAME [flags]",
		Short: "run an example tool server: get-time, exec, fswatch or notes",
		Long: `Runs an example RAP tool server until interrupted (Ctrl-C stops it gracefully).
It prints the base URL to give a runtime ('rap invoke', or a tool_sets entry).
With RAP_EMBEDDED set (a toolset_command entry), it listens on a free loopback port
unless --listen is given, and prints {"port": N} as its first line.

The notes example keeps its notes in DIR/notes with --data-dir, else in a
temporary directory removed when it stops. Its toolset says needsMigration:
a runtime moving a session to another runtime calls its /migrate, and it
sends the session's notes to the destination's notes server. Both servers
need the same --peer-token, which signs the notes they exchange.

Examples:
` + exampleList(),
		Example: `  rap example get-time
  rap example exec --listen 127.0.0.1:3002 --tool-token "$RAP_TOOL_TOKEN"
  rap example fswatch --data-dir ./data
  rap example notes --data-dir ./notes-a --peer-token "$RAP_NOTES_PEER_TOKEN"`,
		ValidArgs: exampleNames(),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.listenSet = cmd.Flags().Changed("listen")
			f.peerTokenSet = cmd.Flags().Changed("peer-token")
			return runExample(cmd.Context(), a, f, args)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", "127.0.0.1:3001", "`ADDR` to listen on (port 0 picks a free port)")
	addToolTokenFlag(fs, &f.token, "bearer `TOKEN` every invocation must carry (none when empty)")
	fs.StringVar(&f.dataDir, "data-dir", "", "`DIR` for a SQLite store of undelivered callbacks and subscriptions, so they survive a restart (default: in memory); the notes example keeps its notes in DIR/notes")
	fs.StringVar(&f.publicURL, "public-url", "", "base `URL` runtimes reach this server at, when it differs from the listen address")
	fs.Var((*secretValue)(&f.peerToken), "peer-token", "notes example: the secret `TOKEN` shared by the notes servers that sessions migrate between; without it, sessions cannot migrate")
	bindEnv(fs, "peer-token", envNotesPeerToken)
	fs.BoolVar(&f.oxp, "oxp", false, "also answer the OXP 1.0 routes (GET /health, GET /tools, POST /tools/call) for synchronous OXP clients; see docs/otc.md")
	return cmd
}

// exampleList is one line per example, for the help text.
func exampleList() string {
	var b strings.Builder
	for _, n := range exampleNames() {
		fmt.Fprintf(&b, "  %-8s %s\n", n, examples[n].about)
	}
	return strings.TrimRight(b.String(), "\n")
}

func runExample(ctx context.Context, a *app, f exampleFlags, pos []string) error {
	stdout, stderr := a.stdout, a.stderr
	listen, token, dataDir, publicURL, oxp := &f.listen, &f.token, &f.dataDir, &f.publicURL, &f.oxp
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
	if f.peerTokenSet && name != "notes" {
		return fmt.Errorf("%w: --peer-token is for the notes example only; drop it for %s", errUsage, name)
	}
	if name == "exec" {
		fmt.Fprint(stderr, execWarning)
		if !loopbackAddr(*listen) && *token == "" {
			return fmt.Errorf("%w: refusing to serve the exec example on %s, which is not a loopback address, without --tool-token", errUsage, *listen)
		}
	}

	log := a.log
	opts := &rap.ServerOptions{Logger: log, BearerToken: *token, PublicURL: *publicURL}
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
	var tempNotes bool
	if name == "notes" {
		if *dataDir != "" {
			f.notesDir = filepath.Join(*dataDir, "notes")
		} else {
			dir, err := os.MkdirTemp("", "rap-notes-")
			if err != nil {
				return fmt.Errorf("creating a temporary directory for the notes: %w (pass --data-dir DIR to keep them in DIR/notes)", err)
			}
			defer os.RemoveAll(dir)
			f.notesDir, tempNotes = dir, true
		}
	}
	srv, err := ex.build(opts, f)
	if err != nil {
		return err
	}
	if *oxp {
		otc.ServeOXP(rapServer(srv))
	}

	// Run by a runtime's toolset_command entry
	// (RAP_EMBEDDED set), pick a free loopback port unless --listen says
	// otherwise, and report it on the first line (see embeddedListen).
	embedded := os.Getenv(config.EnvEmbedded) != ""
	if embedded && !f.listenSet {
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

	base, _ := listenURLs("http", ln.Addr())
	if embedded {
		fmt.Fprintf(stdout, "{\"port\": %d}\n", ln.Addr().(*net.TCPAddr).Port)
	}
	fmt.Fprintf(stdout, "%s tool server listening on %s\n", name, base)
	fmt.Fprintf(stdout, "  manifest: %s%s\n", base, rap.WellKnownPath)
	fmt.Fprintf(stdout, "  try:      rap invoke %s %s\n", base, tryCall(name))
	if *token != "" {
		fmt.Fprintln(stdout, "  invocations need the bearer token")
	}
	if name == "notes" {
		if tempNotes {
			fmt.Fprintf(stdout, "  notes in: %s (removed when it stops; pass --data-dir to keep them)\n", f.notesDir)
		} else {
			fmt.Fprintf(stdout, "  notes in: %s\n", f.notesDir)
		}
		if f.peerToken == "" {
			fmt.Fprintln(stdout, "  no --peer-token: sessions cannot migrate to or from this server")
		}
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
	case "notes":
		return `add_note '{"text":"buy milk"}'`
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
