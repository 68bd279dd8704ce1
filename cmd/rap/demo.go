package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/store/sqlite"
	"github.com/gorap/gorap/termchat"
)

// demoScript is the scripted model's part of the demo conversation.
//
//go:embed demo/demo.json
var demoScript []byte

// Placeholders in the arguments of scripted tool calls, filled in by
// demoModel from the conversation:
//   - {{subscription_id}}: the id of the latest subscribe_clock call, so the
//     script can cancel the subscription it made;
//   - {{thread_id}}: the id of the thread the model runs in, read from the
//     runtime's note that starts a thread spawned for a subscription event
//     (RAP SU-6), so the script can close it;
//   - {{event}}: the text of the latest subscription event, so the script
//     can report it to the parent thread.
const (
	subscriptionIDPlaceholder = "{{subscription_id}}"
	threadIDPlaceholder       = "{{thread_id}}"
	eventPlaceholder          = "{{event}}"
)

// spawnedThreadID finds the thread id in the runtime's note to a thread
// spawned for an event: "This thread (ID) was started …" or "thread_id "ID"".
var spawnedThreadID = regexp.MustCompile(`This thread \(([A-Za-z0-9_-]+)\)|thread_id "([A-Za-z0-9_-]+)"`)

type demoOptions struct {
	model   string
	dataDir string
	verbose bool
	timeout time.Duration // per step
	// logger, when set, is where the runtime and the tool server log;
	// otherwise warnings (and with verbose, Info) go to stderr as text.
	logger *slog.Logger
}

// demoModel wraps the scripted model: it fills in the subscription id
// placeholder of scripted tool calls.
type demoModel struct{ model.Provider }

func (m demoModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	resp, err := m.Provider.Complete(ctx, req, s)
	if err != nil || resp == nil {
		return resp, err
	}
	values := map[string]string{}
	injected := map[string]bool{}
	for _, msg := range req.Messages {
		for _, c := range msg.ToolCalls {
			switch c.Name {
			case "subscribe_clock":
				values[subscriptionIDPlaceholder] = c.ID
			case runtime.InjectedToolName:
				injected[c.ID] = true
			}
		}
		for _, r := range msg.ToolResults {
			if injected[r.CallID] {
				values[eventPlaceholder] = r.Text
			}
		}
		if msg.Role == model.RoleUser {
			if sm := spawnedThreadID.FindStringSubmatch(msg.Text); sm != nil {
				values[threadIDPlaceholder] = sm[1] + sm[2]
			}
		}
	}
	for i, c := range resp.ToolCalls {
		for ph, v := range values {
			if bytes.Contains(c.Arguments, []byte(ph)) {
				// The placeholder sits inside a JSON string: insert v escaped.
				q, _ := json.Marshal(v)
				c.Arguments = bytes.ReplaceAll(c.Arguments, []byte(ph), q[1:len(q)-1])
			}
		}
		resp.ToolCalls[i].Arguments = c.Arguments
	}
	return resp, nil
}

// demoModelFor picks the demo's model: the embedded script unless spec
// names another model. The environment never picks one (an
// exported API key does not turn the demo into a paid one).
func demoModelFor(spec, dataDir string) (model.Provider, bool, error) {
	if spec = strings.TrimSpace(spec); spec == "" || spec == "scripted" {
		path := filepath.Join(dataDir, "demo.json")
		if err := os.WriteFile(path, demoScript, 0o600); err != nil {
			return nil, false, fmt.Errorf("write the demo script: %w", err)
		}
		m, err := scripted.Load(path)
		if err != nil {
			return nil, false, err
		}
		return demoModel{m}, true, nil
	}
	ms, err := parseModelSpec(spec, getenvOS)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", errUsage, err)
	}
	m, err := newModel(ms, nil)
	if err != nil {
		return nil, false, err
	}
	if ms.Provider == "scripted" {
		return demoModel{m}, true, nil
	}
	return m, false, nil
}

// listenLoopback serves h on a fresh loopback port and returns its URL and
// a function that shuts it down.
func listenLoopback(h http.Handler, log *slog.Logger) (string, func(context.Context), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen on a loopback port: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go srv.Serve(ln)
	stop := func(ctx context.Context) {
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// demo runs the demo and prints its transcript to stdout.
func demo(ctx context.Context, opts demoOptions, stdout, stderr io.Writer) (err error) {
	if opts.timeout <= 0 {
		opts.timeout = 30 * time.Second
	}
	log := opts.logger
	if log == nil {
		level := slog.LevelWarn
		if opts.verbose {
			level = slog.LevelInfo
		}
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	}

	dataDir := opts.dataDir
	if dataDir == "" {
		if dataDir, err = os.MkdirTemp("", "rap-demo-"); err != nil {
			return fmt.Errorf("create a temporary data dir: %w (pass --data-dir DIR)", err)
		}
		defer os.RemoveAll(dataDir)
	} else if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir %s: %w", dataDir, err)
	}
	mdl, isScripted, err := demoModelFor(opts.model, dataDir)
	if err != nil {
		return err
	}

	// The tool server.
	tools := gettime.New(&rap.ServerOptions{Logger: log})
	if err := tools.Start(ctx); err != nil {
		return fmt.Errorf("start the gettime tool server: %w", err)
	}
	toolURL, stopTools, err := listenLoopback(tools, log)
	if err != nil {
		return err
	}

	// The runtime.
	st, err := sqlite.Open(filepath.Join(dataDir, storeFile))
	if err != nil {
		return fmt.Errorf("open the demo store: %w", err)
	}
	secret, err := runtime.LoadOrCreateSecret(dataDir)
	if err != nil {
		st.Close()
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return fmt.Errorf("listen on a loopback port: %w", err)
	}
	rtURL := "http://" + ln.Addr().String()
	rt, err := runtime.New(&runtime.Config{
		Store: st, Model: mdl, ToolServers: []string{toolURL}, PublicURL: rtURL,
		Secret: secret, Logger: log, DisplayText: displayText,
		System: "You are the gorap demo agent. Use the tools to answer; be brief.",
	})
	if err != nil {
		ln.Close()
		st.Close()
		return err
	}
	if err := rt.Start(ctx); err != nil {
		ln.Close()
		st.Close()
		return err
	}
	rtSrv := runtime.NewHTTPServer(rt.Handler(), rap.HTTPLimits{}, log)
	go rtSrv.Serve(rap.HTTPLimits{}.Listener(ln, nil))
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if e := rt.Shutdown(sctx); e != nil {
			log.Warn("runtime shutdown", "err", e)
		}
		if e := rtSrv.Shutdown(sctx); e != nil {
			rtSrv.Close()
		}
		if e := tools.Shutdown(sctx); e != nil {
			log.Warn("tool server shutdown", "err", e)
		}
		stopTools(sctx)
		st.Close()
	}()

	var toolNames []string
	if ts, _, err := rap.FetchToolset(ctx, nil, toolURL); err == nil {
		for _, t := range ts.Tools {
			toolNames = append(toolNames, t.Name)
		}
	}
	fmt.Fprintln(stdout, "gorap demo: a RAP tool server, the agent runtime and a model in one process")
	fmt.Fprintf(stdout, "  model:       %s\n", describeModel(mdl))
	fmt.Fprintf(stdout, "  tool server: gettime at %s (%s)\n", toolURL, strings.Join(toolNames, ", "))
	fmt.Fprintf(stdout, "  runtime:     %s (store %s)\n\n", rtURL, filepath.Join(dataDir, storeFile))

	// The conversation, through the runtime's HTTP client API.
	api, err := termchat.NewHTTPAPI(rtURL, "")
	if err != nil {
		return err
	}
	return exitStatus(termchat.PlayDemo(ctx, termchat.DemoOptions{API: api, Strict: isScripted, StepTimeout: opts.timeout,
		Stdout: stdout, Stderr: stderr}), stderr, "demo")
}
