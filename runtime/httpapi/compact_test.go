package httpapi

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
)

// slowCompactor compacts thread "t1" after delay, as a model writing a
// long summary does.
type slowCompactor struct {
	fakeEngine
	delay time.Duration
}

func (e *slowCompactor) CompactThread(ctx context.Context, id string) (api.Compaction, error) {
	select {
	case <-time.After(e.delay):
	case <-ctx.Done():
		return api.Compaction{}, ctx.Err()
	}
	return api.Compaction{UpToSeq: 8, Messages: 8, Summary: "the summary"}, nil
}

func (e *slowCompactor) Compactions(ctx context.Context, id string) ([]api.Compaction, error) {
	return nil, nil
}

// POST /v1/threads/{id}/compact answers when the summary is written, even
// when the model takes longer than the server's write timeout, which
// bounds the other (immediate) answers.
func TestCompactAnswersAfterTheWriteTimeout(t *testing.T) {
	const writeTimeout = 100 * time.Millisecond
	h := New(&slowCompactor{delay: 4 * writeTimeout}, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := rap.HTTPLimits{WriteTimeout: writeTimeout}
	srv := NewHTTPServer(h, l, nil)
	go srv.Serve(l.Listener(ln, nil))
	t.Cleanup(func() { srv.Close() })
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/threads/t1/compact", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("POST compact with a summary slower than the write timeout: %v; want its answer", err)
	}
	defer resp.Body.Close()
	var c api.Compaction
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&c) != nil || c.Summary != "the summary" {
		t.Errorf("POST compact: %d %+v; want 200 and the compaction", resp.StatusCode, c)
	}
}
