package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// waitFor is the generous deadline of every wait in these tests.
const waitFor = 20 * time.Second

func newGated(n int) *gated {
	g := &gated{step: make(chan struct{})}
	for i := range n {
		g.pieces = append(g.pieces, fmt.Sprintf("w%d ", i))
	}
	return g
}

// next returns the stream's next event, failing the test on an error.
func next(t *testing.T, s *client.Stream) client.Event {
	t.Helper()
	ev, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// A Stream cut off by the network reconnects by itself
// with the id of the last event it returned: the text of a reply streamed
// across several disconnections arrives exactly once, and every event id
// is new.
func TestStreamResumesAfterDisconnect(t *testing.T) {
	g := newGated(20)
	rt := startRuntime(g, "tok")
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, err := client.New(rt.URL, client.WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	th, err := c.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var reconnects atomic.Int32
	s, err := c.Events(ctx, th.ID, client.StreamOptions{OnReconnect: func(error) { reconnects.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for next(t, s).Type != api.EventReplayDone {
	}
	if _, err := c.PostMessage(ctx, th.ID, "go"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	full := strings.Join(g.pieces, "")
	var text strings.Builder
	// readUntil reads events until the text has the first k pieces.
	readUntil := func(k int) {
		t.Helper()
		want := strings.Join(g.pieces[:k], "")
		for text.String() != want {
			ev := next(t, s)
			if ev.ID != "" && seen[ev.ID] {
				t.Fatalf("event %s returned twice", ev.ID)
			}
			seen[ev.ID] = true
			if ev.Type == api.EventReset {
				t.Fatalf("the resume became a reset: %s", ev.Data)
			}
			if d, ok := ev.Payload.(*api.TextDelta); ok {
				text.WriteString(d.Text)
			}
			if !strings.HasPrefix(full, text.String()) {
				t.Fatalf("text = %q, not a prefix of the reply %q", text.String(), full)
			}
		}
	}
	cuts := 0
	for k := 1; k <= len(g.pieces); k++ {
		g.step <- struct{}{}
		if k%4 == 2 && k < len(g.pieces) {
			// A cut can find no stream: the previous one, cut while it
			// was writing, delivered what the client waited for and
			// ended, and the client reconnects only when it next reads.
			if rt.cutStreams() > 0 {
				cuts++
			}
			k++
			g.step <- struct{}{} // a piece streams while the client is away
		}
		readUntil(k)
	}
	for {
		ev := next(t, s)
		if m, ok := ev.Payload.(*api.Message); ok && m.Role == api.RoleAssistant {
			if m.Text != full {
				t.Fatalf("message = %q", m.Text)
			}
			break
		}
		if _, ok := ev.Payload.(*api.TextDelta); ok {
			t.Fatalf("a text_delta after the whole reply: %s", ev.Data)
		}
	}
	// A cut can meet a connection already ending (its last event written
	// as it was cut), so there may be fewer reconnections than cuts.
	if cuts == 0 {
		t.Fatal("no stream was ever there to cut")
	}
	if n := int(reconnects.Load()); n == 0 || n > cuts {
		t.Fatalf("%d reconnections for %d cuts", n, cuts)
	}
}

// Errors say what happened. A refused token names the
// token; an unknown thread is ErrNotFound; an unreachable runtime says so.
func TestErrorsSayWhatHappened(t *testing.T) {
	rt := startRuntime(scripted.New(nil), "right")
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	bad, _ := client.New(rt.URL, client.WithToken("tok-7f3a"))
	_, err := bad.CreateThread(ctx, api.CreateThreadRequest{})
	if !errors.Is(err, client.ErrUnauthorized) || !strings.Contains(err.Error(), "the runtime refused the client token") ||
		strings.Contains(err.Error(), "tok-7f3a") {
		t.Fatalf("401: %v", err)
	}
	if _, err := bad.Events(ctx, "x", client.StreamOptions{}); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("401 on the stream: %v", err)
	}
	good, _ := client.New(rt.URL, client.WithToken("right"))
	if _, err := good.Thread(ctx, "no-such-thread"); !errors.Is(err, client.ErrNotFound) || !strings.Contains(err.Error(), "no-such-thread") {
		t.Fatalf("404: %v", err)
	}
	if _, err := good.Events(ctx, "no-such-thread", client.StreamOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("404 on the stream: %v", err)
	}
	th, err := good.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := good.AnswerChoice(ctx, th.ID, "nope", 0); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("answer to no choice: %v", err)
	}
	if _, err := good.PostMessage(ctx, th.ID, strings.Repeat("x", 300000)); !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("too long a message: %v", err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	down, _ := client.New("http://" + addr)
	if _, err := down.ListThreads(ctx, client.ListOptions{}); err == nil || !strings.Contains(err.Error(), "cannot reach the runtime") {
		t.Fatalf("unreachable: %v", err)
	}
	if _, err := client.New("127.0.0.1:8080"); err == nil {
		t.Fatal("a URL without scheme was accepted")
	}
}

// The whole API: threads and their children, history, status, close.
func TestThreadsAndHistory(t *testing.T) {
	rt := startRuntime(scripted.New([]scripted.Turn{{Text: "You said: {{last_user}}", Repeat: true}}), "")
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, _ := client.New(rt.URL + "/")
	th, err := c.CreateThread(ctx, api.CreateThreadRequest{UserID: "bob"})
	if err != nil || th.Toolsets == nil {
		t.Fatalf("create: %+v, %v", th, err)
	}
	key := "k1"
	for range 2 {
		if _, err := c.PostMessageWithKey(ctx, th.ID, "hello", key); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.RT.Idle(ctx, th.ID); err != nil {
		t.Fatal(err)
	}
	h, err := c.History(ctx, th.ID)
	if err != nil || len(h) != 2 || h[1].Text != "You said: hello" {
		t.Fatalf("history = %+v, %v", h, err)
	}
	info, err := c.Thread(ctx, th.ID)
	if err != nil || info.LastSeq != 2 || info.UserID != "bob" {
		t.Fatalf("thread = %+v, %v", info, err)
	}
	kids, err := c.Children(ctx, th.ID)
	if err != nil || len(kids) != 0 {
		t.Fatalf("children = %v, %v", kids, err)
	}
	if ch, err := c.Choices(ctx, th.ID); err != nil || len(ch) != 0 {
		t.Fatalf("choices = %v, %v", ch, err)
	}
	if err := c.CloseThread(ctx, th.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PostMessage(ctx, th.ID, "more"); !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("post to a closed thread: %v", err)
	}
}

// Temporary tells failures worth sending again later (no answer, 429,
// 5xx) from refusals (other 4xx) and success.
func TestTemporary(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), true},
		{&client.Error{Status: http.StatusServiceUnavailable}, true},
		{&client.Error{Status: http.StatusBadGateway}, true},
		{&client.Error{Status: http.StatusTooManyRequests}, true},
		{&client.Error{Status: http.StatusNotFound}, false},
		{&client.Error{Status: http.StatusUnauthorized}, false},
		{fmt.Errorf("wrapped: %w", &client.Error{Status: http.StatusBadRequest}), false},
	} {
		if got := client.Temporary(tc.err); got != tc.want {
			t.Errorf("Temporary(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
