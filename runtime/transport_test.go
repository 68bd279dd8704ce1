package runtime

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Many concurrent invocations of one tool server reuse their connections:
// net/http's default keeps only 2 idle per host, which made most
// invocations open a new one.
func TestTransportReusesConnections(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := &http.Client{Transport: NewTransport()}
	const workers, rounds = 32, 20
	for round := 0; round < rounds; round++ {
		var wg sync.WaitGroup
		for i := 0; i < workers; i++ {
			wg.Go(func() {
				resp, err := client.Post(srv.URL, "application/json", nil)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
	// Each round needs at most `workers` connections and they stay open for
	// the next round; a connection may be back in the idle pool a moment
	// after its request returned, so a few more are dialled. net/http's
	// default (2 idle per host) opens about (workers-2)*rounds = 600.
	if n := opened.Load(); n > 2*workers {
		t.Fatalf("%d connections opened for %d rounds of %d concurrent requests, want at most %d", n, rounds, workers, 2*workers)
	}
}
