package webui_test

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/store/sqlite"
	"github.com/gorap/gorap/webui"
)

// waitFor bounds every wait of the browser tests: generous, because the
// machine running them may be loaded (a browser starts in seconds there).
const waitFor = 60 * time.Second

// chromium returns the path of a Chromium (or Chrome) binary: the one
// GORAP_CHROMIUM names, or the first on PATH. Without one it skips the
// test, or fails it when GORAP_REQUIRE_BROWSER=1 (as .ci/run sets).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GORAP_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("GORAP_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium binary found, and GORAP_REQUIRE_BROWSER=1 (CI) requires the browser tests to run: install Debian's chromium (apt-get install chromium) or set GORAP_CHROMIUM")
	}
	t.Skip("no chromium binary found: install Debian's chromium (apt-get install chromium) or set GORAP_CHROMIUM to run the browser tests")
	return ""
}

// stack is a real runtime (SQLite store, scripted model) serving its API
// and the web UI over real HTTP.
type stack struct {
	t   *testing.T
	URL string
	RT  *runtime.Runtime

	dir     string
	cfg     runtime.Config
	token   string
	store   *sqlite.Store
	handler atomic.Pointer[http.Handler]

	mu      sync.Mutex
	streams map[*http.Request]context.CancelFunc
}

type stackOptions struct {
	model   model.Provider
	tools   []string // tool server URLs
	token   string   // the client token, when the API requires one
	configs func(*runtime.Config)
}

func newStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	s := &stack{t: t, dir: t.TempDir(), token: o.token, streams: map[*http.Request]context.CancelFunc{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := s.handler.Load()
		if h == nil {
			http.Error(w, "runtime not ready", http.StatusServiceUnavailable)
			return
		}
		(*h).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	secret, err := runtime.LoadOrCreateSecret(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	s.cfg = runtime.Config{
		Model:       o.model,
		ToolServers: o.tools,
		PublicURL:   srv.URL,
		Secret:      secret,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if o.configs != nil {
		o.configs(&s.cfg)
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// start starts a runtime over the stack's store and serves it.
func (s *stack) start() {
	s.t.Helper()
	st, err := sqlite.Open(filepath.Join(s.dir, "rap.db"))
	if err != nil {
		s.t.Fatal(err)
	}
	cfg := s.cfg
	cfg.Store = st
	rt, err := runtime.New(&cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	s.RT, s.store = rt, st
	api := s.droppable(rt.Handler())
	if s.token != "" {
		api = requireToken(api, s.token)
	}
	h := webui.WithAPI(api, rt.WebGuard)
	s.handler.Store(&h)
}

// stop shuts the runtime down; requests get 503 until the next start.
func (s *stack) stop() {
	if s.RT == nil {
		return
	}
	s.handler.Store(nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := s.RT.Shutdown(ctx); err != nil {
		s.t.Errorf("runtime shutdown: %v", err)
	}
	s.store.Close()
	s.RT = nil
}

// Restart stops the runtime and starts a new one on the same store, as a
// restarted rap serve would be: the event streams end, and the event ids
// the page holds are from a runtime that is gone.
func (s *stack) Restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

// droppable lets DropStreams end the event streams being served.
func (s *stack) droppable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		r = r.WithContext(ctx)
		s.mu.Lock()
		s.streams[r] = cancel
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.streams, r)
			s.mu.Unlock()
			cancel()
		}()
		next.ServeHTTP(w, r)
	})
}

// DropStreams ends every event stream being served, as a network failure
// would, and reports how many there were.
func (s *stack) DropStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cancel := range s.streams {
		cancel()
	}
	return len(s.streams)
}

// requireToken answers 401 to API requests without the bearer token, as
// rap serve does.
func requireToken(next http.Handler, token string) http.Handler {
	want := sha256.Sum256([]byte("Bearer " + token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if !strings.HasPrefix(r.URL.Path, "/rap/") && subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"missing or wrong bearer token"}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// toolServer serves a RAP tool server made with the SDK over real HTTP.
func toolServer(t *testing.T, s *rap.Server) string {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		s.Shutdown(ctx)
	})
	return srv.URL
}

// browser is a headless Chromium tab. Uncaught exceptions and messages
// the page logs as errors (a blocked inline script, a CSP violation) fail
// the test.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string
	// allowNetworkErrors tolerates failed requests logged by the browser
	// (a 401 before the token is given).
	allowNetworkErrors atomic.Bool
}

// newBrowser starts a fresh headless Chromium with a viewport of w×h CSS
// pixels.
func newBrowser(t *testing.T, w, h int, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	path := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(w, h),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx}
	// The first action starts the browser and lives as long as it: no
	// deadline on it (see chromedp.Run), so bound it from here.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx, chromedp.EmulateViewport(int64(w), int64(h))) }()
	select {
	case err := <-started:
		if err != nil {
			cancelCtx()
			cancelAlloc()
			t.Fatalf("starting %s: %v", path, err)
		}
	case <-time.After(waitFor):
		cancelCtx()
		cancelAlloc()
		t.Fatalf("%s did not start within %v", path, waitFor)
	}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			bad := m.IsException() || m.Type == chromedp.ConsoleError
			if m.Source == "network" && b.allowNetworkErrors.Load() {
				bad = false
			}
			if bad {
				b.mu.Lock()
				b.errors = append(b.errors, m.String())
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		<-done
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("browser console: %s", e)
		}
	})
	return b
}

// run runs actions with the tests' deadline, failing the test on error.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// wait polls a JavaScript expression until it is truthy.
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitFor+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(waitFor)))
	if err != nil {
		var page string
		if html, err := evalJS[string](b.ctx, `document.getElementById('main')?.innerText`); err == nil {
			page = html
		}
		b.t.Fatalf("waiting until %s: %v\npage text:\n%s", what, err, page)
	}
}

// text returns the text of the first element matching a CSS selector.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, `document.querySelector(`+jsString(sel)+`)?.textContent ?? ''`)
}

// evalJS evaluates a JavaScript expression with the tests' deadline.
func evalJS[T any](ctx context.Context, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// eval evaluates a JavaScript expression, failing the test on error.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := evalJS[T](b.ctx, expr)
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// screenshot writes the viewport to docs/images/NAME.png when
// GORAP_UPDATE_SCREENSHOTS=1 (the screenshots of docs/webui.md).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if os.Getenv("GORAP_UPDATE_SCREENSHOTS") != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, waitFor)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join("..", "docs", "images", name+".png")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("wrote %s", path)
}
