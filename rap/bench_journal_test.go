package rap_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
)

// BenchmarkAcknowledgeOneByOne measures the time to acknowledge one
// invocation when the client waits for each answer before sending the
// next (ns/op is the latency), without a store and with the durable
// store, whose call journal records each invocation, synced to disk,
// before the answer.
func BenchmarkAcknowledgeOneByOne(b *testing.B) {
	for _, durableStore := range []bool{false, true} {
		name := "memory"
		if durableStore {
			name = "durable"
		}
		b.Run(name, func(b *testing.B) {
			callbacks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
			}))
			defer callbacks.Close()
			opts := &rap.ServerOptions{Logger: sdkQuiet(), Queue: 1 << 16}
			if durableStore {
				st, err := durable.Open(filepath.Join(b.TempDir(), "tool.db"))
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				opts.Store = st
			}
			s := rap.NewServer("bench", opts)
			rap.AddTool(s, &rap.Tool{Name: "noop", Description: "Returns at once."},
				func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) { return rap.Text("ok"), nil })
			if err := s.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer s.Shutdown(context.Background())
			srv := httptest.NewServer(s)
			defer srv.Close()
			cb := callbacks.URL + "/cb"
			b.ResetTimer()
			for i := range b.N {
				body := fmt.Appendf(nil, `{"operation":"noop","arguments":{},"id":"call_%d","group_id":"bench","callback_url":%q}`, i, cb)
				resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
