package wiretest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
)

// CheckConnectionReuse runs rounds of concurrent completions, n at a time
// (each round's requests all reach the server before any is answered), of
// the provider newProvider builds for a server of api at baseURL (its
// root; an OpenAI-compatible provider appends /v1), and fails t unless the
// later rounds reuse the first round's connections: a provider built
// without an HTTP client must keep more than net/http's default two idle
// connections per host.
func CheckConnectionReuse(t *testing.T, api http.Handler, newProvider func(baseURL string) model.Provider) {
	t.Helper()
	const n, rounds = 8, 3
	var (
		mu      sync.Mutex
		arrived int
		full    = make(chan struct{})
		opened  atomic.Int64
	)
	barrier := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		if arrived%n == 0 {
			close(full)
		}
		wait := full
		mu.Unlock()
		select {
		case <-wait:
		case <-time.After(30 * time.Second):
			http.Error(w, "wiretest: the round's other requests did not arrive", http.StatusGatewayTimeout)
			return
		}
		api.ServeHTTP(w, r)
	})
	ts := httptest.NewUnstartedServer(barrier)
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	ts.Start()
	defer ts.Close()
	p := newProvider(ts.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}
	for round := 0; round < rounds; round++ {
		mu.Lock()
		full = make(chan struct{})
		mu.Unlock()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.Complete(ctx, req, nil); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: Complete: %v", round, err)
		}
	}
	// Round one opens n connections; the others should find them idle. A
	// client keeping two idle connections per host opens n-2 more a round.
	if got := opened.Load(); got > n+2 {
		t.Errorf("%d completions in %d rounds of %d at once opened %d connections; want at most %d: the provider's HTTP client drops idle connections (MaxIdleConnsPerHost)", n*rounds, rounds, n, got, n+2)
	}
}
