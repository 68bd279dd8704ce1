package client_test

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// testRuntime is a real runtime over a SQLite file, served over HTTP.
type testRuntime struct {
	URL string
	RT  *runtime.Runtime

	mu      sync.Mutex
	streams map[*http.Request]context.CancelFunc
	stop    func()
}

// startRuntime starts a runtime running model m, with the RAP tool
// servers at toolServers, served at an httptest URL; with a token, the
// client API requires it, as rap serve does.
func startRuntime(m model.Provider, token string, toolServers ...string) *testRuntime {
	dir, err := os.MkdirTemp("", "gorap-client")
	if err != nil {
		log.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(dir, "rap.db"))
	if err != nil {
		log.Fatal(err)
	}
	secret, err := runtime.LoadOrCreateSecret(dir)
	if err != nil {
		log.Fatal(err)
	}
	tr := &testRuntime{streams: map[*http.Request]context.CancelFunc{}}
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"missing or wrong bearer token: send Authorization: Bearer $RAP_TOKEN"}`)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/events") {
			ctx, cancel := context.WithCancel(r.Context())
			r = r.WithContext(ctx)
			tr.mu.Lock()
			tr.streams[r] = cancel
			tr.mu.Unlock()
			defer func() {
				tr.mu.Lock()
				delete(tr.streams, r)
				tr.mu.Unlock()
				cancel()
			}()
		}
		h.ServeHTTP(w, r)
	}))
	rt, err := runtime.New(&runtime.Config{
		Store:       st,
		Model:       m,
		ToolServers: toolServers,
		PublicURL:   srv.URL,
		Secret:      secret,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	h = rt.Handler()
	tr.URL, tr.RT = srv.URL, rt
	tr.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.CloseClientConnections()
		rt.Shutdown(ctx)
		srv.Close()
		st.Close()
		os.RemoveAll(dir)
	}
	return tr
}

// Stop stops the runtime and removes its files.
func (tr *testRuntime) Stop() { tr.stop() }

// cutStreams ends every event stream served now, as a network failure
// would; it returns how many it cut.
func (tr *testRuntime) cutStreams() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, cancel := range tr.streams {
		cancel()
	}
	return len(tr.streams)
}

// gated streams its reply one piece per token sent on step.
type gated struct {
	pieces []string
	step   chan struct{}
}

func (g *gated) Name() string         { return "gated (test)" }
func (g *gated) SupportsImages() bool { return false }

func (g *gated) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	for _, p := range g.pieces {
		select {
		case <-g.step:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.TextDelta(p)
	}
	return &model.Response{Text: strings.Join(g.pieces, ""), StopReason: "end_turn"}, nil
}
