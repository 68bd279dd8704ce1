package runtime

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
)

// downStore is a store whose transactions fail while down is set.
type downStore struct {
	store.Store
	down *atomic.Bool
}

func (d downStore) View(ctx context.Context, fn func(store.Tx) error) error {
	if d.down.Load() {
		return errors.New("connection refused")
	}
	return d.Store.View(ctx, fn)
}

func probe(t *testing.T, h http.Handler, path string) int {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w.Code
}

// TestHealthEndpoints: /healthz answers 200 while the
// process serves; /readyz answers 200 only once the runtime started, while
// its store answers, and 503 again from the start of shutdown. Other paths
// go to the wrapped handler.
func TestHealthEndpoints(t *testing.T) {
	var down atomic.Bool
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok"}},
		wrapStore: func(s store.Store) store.Store { return downStore{Store: s, down: &down} }})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := e.rt.WithHealth(next)
	if c := probe(t, h, HealthzPath); c != http.StatusOK {
		t.Errorf("healthz = %d, want 200", c)
	}
	if c := probe(t, h, ReadyzPath); c != http.StatusOK {
		t.Errorf("readyz of a started runtime = %d, want 200", c)
	}
	if c := probe(t, h, "/v1/threads"); c != http.StatusTeapot {
		t.Errorf("another path = %d, want the wrapped handler's 418", c)
	}
	down.Store(true)
	if c := probe(t, h, ReadyzPath); c != http.StatusServiceUnavailable {
		t.Errorf("readyz while the store fails = %d, want 503", c)
	}
	if c := probe(t, h, HealthzPath); c != http.StatusOK {
		t.Errorf("healthz while the store fails = %d, want 200 (the process lives)", c)
	}
	down.Store(false)
	if c := probe(t, h, ReadyzPath); c != http.StatusOK {
		t.Errorf("readyz once the store answers again = %d, want 200", c)
	}
	rt := e.rt
	e.stop()
	if c := probe(t, rt.WithHealth(next), ReadyzPath); c != http.StatusServiceUnavailable {
		t.Errorf("readyz after shutdown began = %d, want 503", c)
	}

	// Not started yet.
	cfg := e.cfg
	cfg.Store = e.openStore()
	defer cfg.Store.Close()
	fresh, err := New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := probe(t, fresh.WithHealth(next), ReadyzPath); c != http.StatusServiceUnavailable {
		t.Errorf("readyz before Start = %d, want 503", c)
	}
}
