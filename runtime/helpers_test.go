package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// waitFor is the generous deadline of every wait in these tests.
const waitFor = 20 * time.Second

// logBuffer collects JSON log lines safely.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// records returns the log records whose msg is msg.
func (l *logBuffer) records(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// recorder wraps a provider and records every request.
type recorder struct {
	model.Provider
	mu   sync.Mutex
	reqs []model.Request
}

func (r *recorder) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	// A provider must not keep req: keep a copy of its messages.
	req.Messages = slices.Clone(req.Messages)
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Provider.Complete(ctx, req, s)
}

// ContextWindow passes on the window the wrapped model declares
// (model.WindowReporter), 0 when it declares none.
func (r *recorder) ContextWindow() int {
	if w, ok := r.Provider.(model.WindowReporter); ok {
		return w.ContextWindow()
	}
	return 0
}

// ServerCompaction passes on the wrapped model's own compaction
// (model.ServerCompactor): an error when it has none.
func (r *recorder) ServerCompaction() (int, error) { return model.ServerCompaction(r.Provider) }

func (r *recorder) requests() []model.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]model.Request(nil), r.reqs...)
}

// env is a runtime over a real SQLite file, served over real HTTP.
type env struct {
	t       testing.TB
	dir     string
	cfg     Config
	rt      *Runtime
	st      *sqlite.Store
	srv     *httptest.Server
	handler atomic.Pointer[http.Handler]
	logs    *logBuffer
	model   *recorder
	// wrapStore wraps the store the runtime sees; see envOptions.
	wrapStore func(store.Store) store.Store
	// pgURL, when set, is the PostgreSQL schema the runtime's store is in
	// instead of SQLite (envOptions.postgres); pg is that store while the
	// runtime runs (st is then nil).
	pgURL string
	pg    *postgres.Store
}

type envOptions struct {
	turns   []scripted.Turn
	model   model.Provider // overrides turns
	servers []string
	tweak   func(*Config)
	// wrapStore, when set, wraps the store the runtime sees (each start).
	wrapStore func(store.Store) store.Store
	// postgres runs the runtime on a PostgreSQL store of its own (a new
	// schema of GORAP_TEST_POSTGRES_URL) instead of SQLite; the test is
	// skipped when that variable is unset.
	postgres bool
	// pgURL, when set, runs the runtime on that PostgreSQL schema, which
	// other envs of the test may share (several processes on one store).
	pgURL string
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), logs: &logBuffer{}}
	if e.pgURL = o.pgURL; o.postgres && e.pgURL == "" {
		e.pgURL = pgtest.URL(t)
	}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := e.handler.Load()
		if h == nil {
			http.Error(w, "runtime not ready", http.StatusServiceUnavailable)
			return
		}
		(*h).ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	p := o.model
	if p == nil {
		p = scripted.New(o.turns)
	}
	e.model = &recorder{Provider: p}
	secret, err := LoadOrCreateSecret(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = Config{
		Model:         e.model,
		ToolServers:   o.servers,
		PublicURL:     e.srv.URL,
		Secret:        secret,
		Logger:        slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		DispatchRetry: RetryPolicy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Attempts: 4},
	}
	if o.tweak != nil {
		o.tweak(&e.cfg)
	}
	e.wrapStore = o.wrapStore
	e.start()
	t.Cleanup(e.stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("runtime log:\n%s", e.logs)
		}
	})
	return e
}

// openStore opens the env's store: SQLite in its dir, or its PostgreSQL
// schema.
func (e *env) openStore() store.Store {
	e.t.Helper()
	if e.pgURL != "" {
		pg, err := postgres.Open(context.Background(), e.pgURL)
		if err != nil {
			e.t.Fatal(err)
		}
		return pg
	}
	st, err := sqlite.Open(filepath.Join(e.dir, "rap.db"))
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *env) start() {
	e.t.Helper()
	var st store.Store = e.openStore()
	switch s := st.(type) {
	case *sqlite.Store:
		e.st = s
	case *postgres.Store:
		e.pg = s
	}
	cfg := e.cfg
	cfg.Store = st
	if e.wrapStore != nil {
		cfg.Store = e.wrapStore(st)
	}
	rt, err := New(&cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.rt = rt
	h := rt.Handler()
	e.handler.Store(&h)
}

func (e *env) stop() {
	if e.rt == nil {
		return
	}
	e.handler.Store(nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := e.rt.Shutdown(ctx); err != nil {
		e.t.Errorf("shutdown: %v", err)
	}
	var err error
	if e.pg != nil {
		err = e.pg.Close()
	} else {
		err = e.st.Close()
	}
	if err != nil {
		e.t.Errorf("close store: %v", err)
	}
	e.rt = nil
}

// offline runs fn on the store while the runtime is stopped.
func (e *env) offline(fn func(store.Tx) error) {
	e.t.Helper()
	st := e.openStore()
	defer st.Close()
	if err := st.Update(context.Background(), fn); err != nil {
		e.t.Fatal(err)
	}
}

// newHTTPServer serves h over real HTTP and returns its URL.
func newHTTPServer(t testing.TB, h http.Handler) string {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

// restart stops the runtime and starts a new one on the same data dir.
func (e *env) restart() {
	e.t.Helper()
	e.stop()
	e.start()
}

func (e *env) newThread() string {
	e.t.Helper()
	id, err := e.rt.CreateThread(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) post(thread, text string) {
	e.t.Helper()
	if err := e.rt.PostMessage(context.Background(), thread, text); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) idle(thread string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := e.rt.Idle(ctx, thread); err != nil {
		e.t.Fatal(err)
	}
}

// history reads the thread's history as the runtime stored it (History
// returns it as the client API shows it).
func (e *env) history(thread string) []store.Message {
	e.t.Helper()
	var h []store.Message
	err := e.rt.store.View(context.Background(), func(tx store.Tx) error {
		if _, err := tx.Thread(thread); err != nil {
			return err
		}
		var err error
		h, err = tx.History(thread)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// waitHistory polls the history until cond holds.
func (e *env) waitHistory(thread string, what string, cond func([]store.Message) bool) []store.Message {
	e.t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		h := e.history(thread)
		if cond(h) {
			return h
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s; history:\n%s", what, dump(h))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dump(h []store.Message) string {
	var sb strings.Builder
	for _, m := range h {
		b, _ := json.Marshal(m)
		sb.Write(b)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// results returns every tool result of the history.
func results(h []store.Message) []store.ToolResult {
	var out []store.ToolResult
	for _, m := range h {
		out = append(out, m.ToolResults...)
	}
	return out
}

// calls returns every tool call of the history.
func calls(h []store.Message) []store.ToolCall {
	var out []store.ToolCall
	for _, m := range h {
		out = append(out, m.ToolCalls...)
	}
	return out
}

func hasText(h []store.Message, role store.Role, sub string) bool {
	for _, m := range h {
		if m.Role == role && strings.Contains(m.Text, sub) {
			return true
		}
	}
	return false
}

// callback POSTs body to url and returns the status and body.
func callback(t testing.TB, url string, body any, header ...string) (int, string) {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(rb)
}

// toolServer is a RAP tool server over real HTTP whose behaviour each test
// controls: it serves a manifest and records invocations, and the test
// sends the callbacks itself.
type toolServer struct {
	t        testing.TB
	srv      *httptest.Server
	mu       sync.Mutex
	name     string
	tools    []rap.Tool
	manifest []byte // when set, served as is
	down     bool
	invs     []rap.Invocation
	gets     []*http.Request
	onInvoke func(inv rap.Invocation) int // status to answer; nil means 200
	invoked  chan rap.Invocation
	// onOther sees every other POST (/close_thread, /cancel_tool_call),
	// answered 200.
	onOther func(r *http.Request, body []byte)
}

func newToolServer(t testing.TB, name string, tools ...rap.Tool) *toolServer {
	ts := &toolServer{t: t, name: name, tools: tools, invoked: make(chan rap.Invocation, 100)}
	ts.srv = httptest.NewServer(ts)
	t.Cleanup(ts.srv.Close)
	return ts
}

func (ts *toolServer) URL() string { return ts.srv.URL }

func (ts *toolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ts.mu.Lock()
	down := ts.down
	ts.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == rap.WellKnownPath:
		ts.mu.Lock()
		ts.gets = append(ts.gets, r)
		body := ts.manifest
		if body == nil {
			body, _ = json.Marshal(rap.Toolset{Name: ts.name, Endpoint: ts.srv.URL + "/invoke", Tools: ts.tools})
		}
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	case r.Method == http.MethodPost && r.URL.Path == "/invoke":
		// RAP TR-1: invocations are JSON POSTs.
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			ts.t.Errorf("invocation Content-Type = %q, want application/json (RAP TR-1)", ct)
			http.Error(w, "want application/json", http.StatusUnsupportedMediaType)
			return
		}
		body, _ := io.ReadAll(r.Body)
		inv, err := rap.DecodeInvocation(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		status := http.StatusOK
		if ts.onInvoke != nil {
			status = ts.onInvoke(*inv)
		}
		ts.mu.Lock()
		ts.invs = append(ts.invs, *inv)
		ts.mu.Unlock()
		w.WriteHeader(status)
		if status == http.StatusOK {
			ts.invoked <- *inv
		}
	case r.Method == http.MethodPost && ts.onOther != nil:
		body, _ := io.ReadAll(r.Body)
		ts.onOther(r, body)
	default:
		http.NotFound(w, r)
	}
}

func (ts *toolServer) wait() time.Duration { return waitFor }

func (ts *toolServer) setDown(v bool) {
	ts.mu.Lock()
	ts.down = v
	ts.mu.Unlock()
}

func (ts *toolServer) invocations() []rap.Invocation {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]rap.Invocation(nil), ts.invs...)
}

func (ts *toolServer) discoveries() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.gets)
}

// next waits for the next accepted invocation.
func (ts *toolServer) next() rap.Invocation {
	ts.t.Helper()
	select {
	case inv := <-ts.invoked:
		return inv
	case <-time.After(ts.wait()):
		ts.t.Fatalf("tool server %s: no invocation arrived", ts.name)
		return rap.Invocation{}
	}
}

// reply sends a text result for inv and checks it was accepted.
func reply(t testing.TB, inv rap.Invocation, text string) {
	t.Helper()
	status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: inv.GroupID, ID: inv.ID, Text: text})
	if status != http.StatusOK {
		t.Fatalf("callback for %s: status %d: %s", inv.ID, status, body)
	}
}

func tool(name string) rap.Tool {
	return rap.Tool{Name: name, Description: "test tool " + name, InputSchema: rap.EmptyObjectSchema}
}

// echoTool takes {"text": string} (required).
func echoTool() rap.Tool {
	return rap.Tool{Name: "echo", Description: "echoes text",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)}
}

func call(name, args string) scripted.Call {
	return scripted.Call{Name: name, Arguments: json.RawMessage(args)}
}

func fmtReqTools(req model.Request) string {
	var names []string
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	return fmt.Sprint(names)
}

func statMode(path string) (os.FileMode, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Mode().Perm(), nil
}

// subscribed reports whether the thread has a subscriber now.
func (h *hub) subscribed(threadID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[threadID]) > 0
}

// subscribe registers a subscriber of the thread's live events.
func (h *hub) subscribe(threadID string) (*subscriber, func()) {
	s, cancel, _ := h.attach(threadID, "")
	return s, cancel
}

// attach is the attach of h's events, for tests of a hub without its
// runtime.
func (h *hub) attach(threadID, lastID string) (*subscriber, func(), attachment) {
	s, cancel, att, err := h.ev.attach(context.Background(), threadID, lastID)
	if err != nil {
		panic(err)
	}
	return s, cancel, att
}

// newLocalHub returns a hub with the events of a runtime alone on its
// store, without the runtime.
func newLocalHub(l StreamLimits) (*hub, *localEvents) {
	h := newHub(l)
	le := newLocalEvents(h)
	h.ev = le
	return h, le
}

// testStoreID is the store id of the shared events of newSharedHub.
const testStoreID = "0123456789ab"

// newSharedHub returns a hub with the events of a runtime on a shared
// store, without the runtime: what reads the store may not be called.
func newSharedHub(l StreamLimits) (*hub, *sharedEvents) {
	h := newHub(l)
	se := newSharedEvents(h, nil, testStoreID)
	h.ev = se
	return h, se
}

// primeEvents returns the events a client that connects afresh receives
// before live ones (the full replay).
func (r *Runtime) primeEvents(ctx context.Context, id string) ([]Event, error) {
	evs, _, err := r.replayEvents(ctx, id, attachment{})
	return evs, err
}
