package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// fakeStreams serves scripted event-stream connections: the n-th request
// gets the n-th body, then the connection ends (the last one stays open
// until the client leaves). It records each request's Last-Event-ID.
type fakeStreams struct {
	mu      sync.Mutex
	bodies  []string
	lastIDs []string
}

func (f *fakeStreams) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	n := len(f.lastIDs)
	f.lastIDs = append(f.lastIDs, r.Header.Get("Last-Event-ID"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	if n >= len(f.bodies) {
		http.Error(w, `{"error":"no more"}`, http.StatusNotFound)
		return
	}
	io.WriteString(w, f.bodies[n])
	w.(http.Flusher).Flush()
	if n == len(f.bodies)-1 {
		<-r.Context().Done()
	}
}

func (f *fakeStreams) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.lastIDs...)
}

// readTypes reads n events and returns their types.
func readTypes(t *testing.T, s *client.Stream, n int) []string {
	t.Helper()
	var out []string
	for range n {
		out = append(out, next(t, s).Type)
	}
	return out
}

// A connection lost in the middle of a replay reconnects with the id of
// the last replayed event it returned, which the runtime answers with a
// reset and a replay afresh.
func TestStreamLostDuringReplay(t *testing.T) {
	f := &fakeStreams{bodies: []string{
		": connected\n\nid: e-3:1\nevent: toolsets\ndata: {\"loaded\":[],\"errors\":[]}\n\n",
		": connected\n\nid: e-5:1\nevent: reset\ndata: {\"reason\":\"cut\"}\n\nid: e-5:2\nevent: toolsets\ndata: {\"loaded\":[],\"errors\":[]}\n\n" +
			"id: e-5:3\nevent: thread\ndata: {\"id\":\"t\"}\n\nid: e-5\nevent: replay_done\ndata: {\"mode\":\"reset\"}\n\n",
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, _ := client.New(srv.URL)
	s, err := c.Events(context.Background(), "t", client.StreamOptions{LastEventID: "e-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := strings.Join(readTypes(t, s, 5), " ")
	if got != "toolsets reset toolsets thread replay_done" {
		t.Fatalf("events = %s", got)
	}
	if ids := f.ids(); len(ids) != 2 || ids[0] != "e-1" || ids[1] != "e-3:1" {
		t.Fatalf("Last-Event-IDs sent = %q, want e-1 then e-3:1", ids)
	}
	if s.LastEventID() != "e-5" {
		t.Fatalf("LastEventID = %q", s.LastEventID())
	}
}

// A connection lost after events with ids resumes after the last one the
// caller got; multi-line data and comments are read as SSE says.
func TestStreamResumesWithLastID(t *testing.T) {
	f := &fakeStreams{bodies: []string{
		"id: e-2\nevent: replay_done\ndata: {\"mode\":\"replay\"}\n\n: keep-alive\n\nid: e-3\nevent: text_delta\ndata: {\"text\":\n" +
			"data: \"a\"}\n\n",
		"id: e-4\nevent: replay_done\ndata: {\"mode\":\"resume\"}\n\nid: e-5\nevent: text_delta\ndata: {\"text\":\"b\"}\n\nid: e-6\nevent: later_kind\ndata: [1]\n\n",
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, _ := client.New(srv.URL)
	s, err := c.Events(context.Background(), "t", client.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var text string
	var types []string
	for range 5 {
		ev := next(t, s)
		types = append(types, ev.Type)
		if d, ok := ev.Payload.(*api.TextDelta); ok {
			text += d.Text
		}
	}
	if got := strings.Join(types, " "); got != "replay_done text_delta replay_done text_delta later_kind" || text != "ab" {
		t.Fatalf("events = %s, text %q", got, text)
	}
	if ids := f.ids(); len(ids) != 2 || ids[1] != "e-3" {
		t.Fatalf("Last-Event-IDs sent = %q, want none then e-3", ids)
	}
}

// With RetryFor negative, the first lost connection ends the stream.
func TestStreamNoRetry(t *testing.T) {
	f := &fakeStreams{bodies: []string{"id: e-1\nevent: replay_done\ndata: {\"mode\":\"replay\"}\n\n", "never"}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, _ := client.New(srv.URL)
	s, err := c.Events(context.Background(), "t", client.StreamOptions{RetryFor: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next(t, s)
	if _, err := s.Next(); err == nil || !strings.Contains(err.Error(), "ended") {
		t.Fatalf("after the connection ended: %v", err)
	}
}
