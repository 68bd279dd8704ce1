package rap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
)

// waitLong bounds every wait in these tests. It is generous so that a busy
// two-core machine does not make them flaky; passing runs take far less.
const waitLong = 30 * time.Second

// fastRetry keeps retries quick in tests.
var fastRetry = rap.RetryPolicy{Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond}

// receipt is one callback a receiver answered with 2xx.
type receipt struct {
	path string
	key  string
	id   string
	seq  int
	body []byte
}

// receiver is a real HTTP callback endpoint. respond picks the status for
// each request; only 2xx answers count as received.
type receiver struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	respond  func(r *http.Request, attempt int) int
	attempts map[string]int // per URL path
	total    int
	bad      []string // protocol violations seen by the endpoint
	got      []receipt
	active   int // requests being handled now
	maxAct   int
	changed  chan struct{}
}

func newReceiver(t testing.TB, respond func(r *http.Request, attempt int) int) *receiver {
	rc := &receiver{t: t, respond: respond, attempts: map[string]int{}, changed: make(chan struct{})}
	rc.srv = httptest.NewServer(rc)
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.active++
	rc.maxAct = max(rc.maxAct, rc.active)
	rc.attempts[r.URL.Path]++
	rc.total++
	attempt := rc.attempts[r.URL.Path]
	respond := rc.respond
	// RAP TR-1: every callback is a JSON object POSTed with
	// Content-Type: application/json.
	if r.Method != http.MethodPost {
		rc.bad = append(rc.bad, "method "+r.Method)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		rc.bad = append(rc.bad, "Content-Type "+ct)
	}
	if err != nil {
		rc.bad = append(rc.bad, "reading body: "+err.Error())
	}
	rc.mu.Unlock()

	status := respond(r, attempt)

	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.active--
	if status >= 200 && status < 300 {
		cb, err := rap.DecodeCallback(body)
		if err != nil {
			rc.bad = append(rc.bad, "body is not a valid callback: "+err.Error())
		} else {
			id := callbackID(cb)
			seq, _ := strconv.Atoi(strings.TrimPrefix(id[strings.LastIndex(id, "/")+1:], "call-"))
			rc.got = append(rc.got, receipt{path: r.URL.Path, key: r.Header.Get(rap.IdempotencyKeyHeader), id: id, seq: seq, body: body})
		}
	}
	close(rc.changed)
	rc.changed = make(chan struct{})
	if status == 0 {
		return // the handler hung up on purpose
	}
	w.WriteHeader(status)
	fmt.Fprintf(w, "status %d from test receiver", status)
}

func callbackID(cb rap.Callback) string {
	switch m := cb.(type) {
	case *rap.ToolResult:
		return m.ID
	case *rap.SubscriptionEvent:
		return m.ToolCallID + "/" + m.Text
	}
	return ""
}

func (rc *receiver) snapshot() (got []receipt, attempts map[string]int, total int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	attempts = make(map[string]int, len(rc.attempts))
	for k, v := range rc.attempts {
		attempts[k] = v
	}
	return append([]receipt(nil), rc.got...), attempts, rc.total
}

// waitFor polls cond until it holds or waitLong passes.
func (rc *receiver) waitFor(what string, cond func() bool) {
	rc.t.Helper()
	deadline := time.After(waitLong)
	for {
		rc.mu.Lock()
		ch := rc.changed
		rc.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			rc.t.Fatalf("timed out after %v waiting for %s", waitLong, what)
		}
	}
}

// checkClean fails the test if the endpoint saw a protocol violation.
func (rc *receiver) checkClean() {
	rc.t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, b := range rc.bad {
		rc.t.Errorf("callback endpoint saw: %s", b)
	}
}

func always(status int) func(*http.Request, int) int {
	return func(*http.Request, int) int { return status }
}

func result(i int) *rap.ToolResult {
	return &rap.ToolResult{GroupID: "thread-1", ID: fmt.Sprintf("call-%d", i), Text: fmt.Sprintf("result %d", i)}
}

// laneEvent is the i-th message of a call's lane: an event of the
// subscription sub, received as "sub/call-i". A call's messages are
// delivered in the order they were sent; different calls' are not
// ordered among themselves.
func laneEvent(sub string, i int) *rap.SubscriptionEvent {
	return &rap.SubscriptionEvent{GroupID: "thread-1", ToolCallID: sub, Text: fmt.Sprintf("call-%d", i)}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// countingTransport counts round trips made through the real transport.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestSendRetries503Then200DeliversOnce(t *testing.T) {
	// RAP TR-6: a 5xx is retried; the receiver ends up with the message
	// exactly once, answered 200. RAP TR-1: every attempt is a JSON POST.
	rc := newReceiver(t, func(_ *http.Request, attempt int) int {
		if attempt <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	s := rap.NewSender(rap.SenderOptions{Retry: fastRetry, Logger: quietLogger()})
	msg := result(7)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := s.Send(ctx, rc.srv.URL+"/cb?token=t", msg); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got, attempts, _ := rc.snapshot()
	if attempts["/cb"] != 3 {
		t.Errorf("attempts = %d, want 3 (two 503s, then 200)", attempts["/cb"])
	}
	if len(got) != 1 || got[0].id != "call-7" {
		t.Fatalf("received %d messages (%v), want exactly call-7 once", len(got), got)
	}
	want, _ := json.Marshal(msg)
	if !bytes.Equal(got[0].body, want) {
		t.Errorf("body = %s, want %s", got[0].body, want)
	}
	if got[0].key == "" {
		t.Errorf("no %s header on the callback", rap.IdempotencyKeyHeader)
	}
	rc.checkClean()
}

func TestSendRetriesConnectionRefusedUntilServerStarts(t *testing.T) {
	// RAP TR-6: a runtime that is not listening yet is a transient
	// failure, retried until it comes up.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens here now: connections are refused

	ct := &countingTransport{}
	s := rap.NewSender(rap.SenderOptions{Client: &http.Client{Transport: ct}, Retry: fastRetry, Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- s.Send(ctx, "http://"+addr+"/cb", result(1)) }()

	deadline := time.Now().Add(waitLong)
	for ct.n.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d attempts against a refused port", ct.n.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-errc:
		t.Fatalf("Send returned %v while the endpoint was down; want it to keep retrying", err)
	default:
	}

	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("re-listening on %s: %v", addr, err)
	}
	var received atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
	}))
	srv.Listener = l
	srv.Start()
	defer srv.Close()

	if err := <-errc; err != nil {
		t.Fatalf("Send: %v", err)
	}
	if n := received.Load(); n != 1 {
		t.Errorf("server received %d callbacks, want 1", n)
	}
}

func TestSendRetriesTimeout(t *testing.T) {
	// RAP TR-6: a receiver that does not answer within the attempt
	// timeout is retried; the hung attempt never counts as received.
	release := make(chan struct{})
	defer close(release)
	rc := newReceiver(t, func(r *http.Request, attempt int) int {
		if attempt == 1 {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return 0
		}
		return http.StatusOK
	})
	// Long enough that the second, immediately answered attempt cannot
	// time out on a busy machine (a -race run on 2 loaded cores can stall
	// a local request for a second); the first attempt waits it out.
	s := rap.NewSender(rap.SenderOptions{Retry: fastRetry, AttemptTimeout: 3 * time.Second, Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := s.Send(ctx, rc.srv.URL+"/slow", result(1)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	got, attempts, _ := rc.snapshot()
	if attempts["/slow"] != 2 {
		t.Errorf("attempts = %d, want 2 (one timed out, one answered)", attempts["/slow"])
	}
	if len(got) != 1 {
		t.Errorf("received %d, want 1", len(got))
	}
}

func TestSendNeverRetries4xx(t *testing.T) {
	// RAP TR-6: a 4xx answer is final: exactly one attempt, and a
	// permanent *DeliveryError that names the status.
	for _, status := range []int{400, 401, 404, 409, 410, 422, 429} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			rc := newReceiver(t, always(status))
			s := rap.NewSender(rap.SenderOptions{Retry: fastRetry, Logger: quietLogger()})
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			err := s.Send(ctx, rc.srv.URL+"/cb?token=secret-token", result(1))
			var de *rap.DeliveryError
			if !errors.As(err, &de) {
				t.Fatalf("Send error = %v, want a *rap.DeliveryError", err)
			}
			if !de.Permanent || de.Status != status {
				t.Errorf("DeliveryError = %+v, want Permanent with Status %d", de, status)
			}
			if !strings.Contains(de.Body, fmt.Sprintf("status %d", status)) {
				t.Errorf("DeliveryError.Body = %q, want the receiver's answer", de.Body)
			}
			if de.URL != rc.srv.URL+"/cb" || strings.Contains(err.Error(), "secret-token") {
				t.Errorf("error exposes the URL's token or lost the URL: URL=%q err=%q", de.URL, err)
			}
			// Give a wrong implementation the chance to retry before
			// counting.
			time.Sleep(100 * time.Millisecond)
			if _, attempts, _ := rc.snapshot(); attempts["/cb"] != 1 {
				t.Errorf("attempts = %d, want exactly 1", attempts["/cb"])
			}
		})
	}
}

func TestSendBackoffGrows(t *testing.T) {
	// RAP TR-6: retries back off exponentially. Against an endpoint that
	// always answers 503 for 1.5 s, with backoff caps 20 ms, 40 ms, ...,
	// 1 s, the expected number of attempts is about 8. Without backoff
	// growth it would be 100 or more; without retries, 1.
	rc := newReceiver(t, always(http.StatusServiceUnavailable))
	s := rap.NewSender(rap.SenderOptions{Retry: rap.RetryPolicy{Initial: 20 * time.Millisecond, Max: time.Second}, Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	err := s.Send(ctx, rc.srv.URL+"/down", result(1))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send error = %v, want one wrapping context.DeadlineExceeded", err)
	}
	var de *rap.DeliveryError
	if !errors.As(err, &de) || de.Status != http.StatusServiceUnavailable || de.Permanent {
		t.Errorf("Send error = %v, want it to wrap the last attempt's 503 DeliveryError", err)
	}
	_, attempts, _ := rc.snapshot()
	if n := attempts["/down"]; n < 3 || n > 25 {
		t.Errorf("attempts in 1.5 s = %d, want between 3 and 25", n)
	}
}

// When the deadline cuts an attempt short, Send's error still wraps the
// runtime's last answer (a 503 here), not only the cut attempt: this made
// TestSendBackoffGrows fail now and then on a loaded machine.
func TestSendDeadlineKeepsLastAnswer(t *testing.T) {
	var n atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		select { // later attempts hang until Send has given up
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	s := rap.NewSender(rap.SenderOptions{Retry: rap.RetryPolicy{Initial: time.Millisecond, Max: time.Millisecond}, Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.Send(ctx, srv.URL+"/cb", result(1))
	var de *rap.DeliveryError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &de) || de.Status != http.StatusServiceUnavailable {
		t.Fatalf("Send error = %v, want one wrapping the deadline and the 503 answer", err)
	}
}

func TestSendGivesUpAfter(t *testing.T) {
	rc := newReceiver(t, always(http.StatusBadGateway))
	s := rap.NewSender(rap.SenderOptions{Retry: rap.RetryPolicy{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond, GiveUpAfter: 200 * time.Millisecond}, Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	err := s.Send(ctx, rc.srv.URL+"/cb", result(1))
	var de *rap.DeliveryError
	if !errors.As(err, &de) || de.Status != http.StatusBadGateway {
		t.Fatalf("Send error = %v, want a DeliveryError with status 502", err)
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Send ran until its context ended (%v); want it to give up after 200 ms", err)
	}
	if _, attempts, _ := rc.snapshot(); attempts["/cb"] < 2 {
		t.Errorf("attempts = %d, want retries before giving up", attempts["/cb"])
	}
}

func TestSendRejectsBadInput(t *testing.T) {
	// Bad input gets an error that names the problem, no request is made,
	// and nothing is enqueued in place of the rejected message.
	rc := newReceiver(t, always(http.StatusOK))
	st, err := durable.Open(filepath.Join(t.TempDir(), "tool.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	huge := &rap.SubscriptionEvent{GroupID: "g", ToolCallID: "big", Text: strings.Repeat("x", rap.MaxCallbackBytes)}
	cases := []struct {
		name string
		url  string
		msg  rap.Callback
		want string
	}{
		{"relative URL", "/callback", result(1), "not an absolute http(s) URL"},
		{"other scheme", "ftp://example.com/cb", result(1), "not an absolute http(s) URL"},
		{"unparseable URL", "http://[::1", result(1), "does not parse"},
		{"long URL", rc.srv.URL + "/?t=" + strings.Repeat("a", rap.MaxCallbackURLBytes), result(1), "byte limit"},
		{"nil message", rc.srv.URL, nil, "msg is nil"},
		{"huge message", rc.srv.URL, huge, "byte limit"},
	}
	for _, mode := range []string{"direct", "outbox"} {
		opts := rap.SenderOptions{Logger: quietLogger()}
		if mode == "outbox" {
			opts.Outbox = st
		}
		s := rap.NewSender(opts)
		for _, c := range cases {
			err := s.Send(context.Background(), c.url, c.msg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s/%s: Send error = %v, want one containing %q", mode, c.name, err, c.want)
			}
		}
		// A good message after the bad ones still goes through.
		if err := s.Send(context.Background(), rc.srv.URL+"/ok", result(1)); err != nil {
			t.Fatalf("%s: good Send after bad ones: %v", mode, err)
		}
	}
	if _, _, total := rc.snapshot(); total != 1 {
		t.Errorf("endpoint saw %d requests, want 1 (the direct good one)", total)
	}
	p, err := st.Pending(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 1 || !strings.HasSuffix(p[0].URL, "/ok") {
		t.Errorf("outbox holds %v, want only the good message", p)
	}
}

func TestSendHeaders(t *testing.T) {
	// Extra headers reach the receiver; Content-Type stays
	// application/json even if the caller tries to change it (RAP TR-1).
	var gotAuth, gotCT atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		gotCT.Store(r.Header.Get("Content-Type"))
	}))
	defer srv.Close()
	h := http.Header{}
	h.Set("Authorization", "Bearer abc")
	h.Set("Content-Type", "text/plain")
	s := rap.NewSender(rap.SenderOptions{Header: h, HeaderOrigins: []string{srv.URL}, Logger: quietLogger()})
	h.Set("Authorization", "changed after NewSender")
	if err := s.Send(context.Background(), srv.URL, result(1)); err != nil {
		t.Fatal(err)
	}
	if gotAuth.Load() != "Bearer abc" {
		t.Errorf("Authorization = %v, want Bearer abc", gotAuth.Load())
	}
	if gotCT.Load() != "application/json" {
		t.Errorf("Content-Type = %v, want application/json", gotCT.Load())
	}
}

func TestSendRedirects(t *testing.T) {
	// A 307 or 308 repeats the POST with its body and is followed; a 302
	// would turn it into a bodiless GET, so it is not followed and counts
	// as a refusal (RAP TR-4, TR-6: not accepted, not retried).
	var gets atomic.Int64
	rc := newReceiver(t, always(http.StatusOK))
	mux := http.NewServeMux()
	mux.HandleFunc("/moved-temporarily", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, rc.srv.URL+"/target", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/found", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/get-target", http.StatusFound)
	})
	mux.HandleFunc("/get-target", func(w http.ResponseWriter, r *http.Request) { gets.Add(1) })
	front := httptest.NewServer(mux)
	defer front.Close()

	s := rap.NewSender(rap.SenderOptions{Retry: fastRetry, Logger: quietLogger()})
	if err := s.Send(context.Background(), front.URL+"/moved-temporarily", result(1)); err != nil {
		t.Fatalf("Send through a 307: %v", err)
	}
	if got, _, _ := rc.snapshot(); len(got) != 1 || got[0].id != "call-1" {
		t.Errorf("after a 307 the target received %v, want call-1", got)
	}
	err := s.Send(context.Background(), front.URL+"/found", result(2))
	var de *rap.DeliveryError
	if !errors.As(err, &de) || de.Status != http.StatusFound || !de.Permanent {
		t.Errorf("Send through a 302 = %v, want a permanent DeliveryError with status 302", err)
	}
	if gets.Load() != 0 {
		t.Errorf("the 302 was followed with a GET")
	}
	rc.checkClean()
}

// lockedBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestSendLogsNoSecrets(t *testing.T) {
	// RAP TR-7: callback URLs carry tokens. Logs, at every level, show the
	// URL without userinfo and query, and never the message body.
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rc := newReceiver(t, func(_ *http.Request, attempt int) int {
		if attempt == 1 {
			return http.StatusServiceUnavailable
		}
		if attempt == 2 {
			return http.StatusOK
		}
		return http.StatusNotFound
	})
	s := rap.NewSender(rap.SenderOptions{Retry: fastRetry, Logger: logger})
	msg := &rap.ToolResult{GroupID: "g", ID: "call-1", Text: "BODY-SECRET"}
	u := strings.Replace(rc.srv.URL, "http://", "http://user:PASS-SECRET@", 1) + "/cb?token=TOKEN-SECRET#FRAG-SECRET"
	if err := s.Send(context.Background(), u, msg); err != nil {
		t.Fatal(err)
	}
	err := s.Send(context.Background(), u, msg) // answered 404
	if err == nil {
		t.Fatal("want an error for the 404")
	}

	// A refused connection: the transport's error text normally repeats
	// the whole URL.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	refusedErr := s.Send(ctx, "http://"+addr+"/cb?token=TOKEN-SECRET", msg)
	if refusedErr == nil {
		t.Fatal("want an error for a refused connection")
	}

	out := logs.String() + err.Error() + refusedErr.Error()
	for _, secret := range []string{"PASS-SECRET", "TOKEN-SECRET", "FRAG-SECRET", "BODY-SECRET"} {
		if strings.Contains(out, secret) {
			t.Errorf("logs or errors contain %s:\n%s", secret, out)
		}
	}
	for _, want := range []string{`"status":503`, `"status":200`, `"status":404`, `"attempt":2`, rc.srv.URL + "/cb"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
}

func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"https://u:p@rt.example/cb?token=abc#f", "http://[::1", "/relative?x=1", "http://h/%zz?q"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := rap.RedactURL(raw)
		u, err := url.Parse(raw)
		if err != nil {
			if got != "<unparseable URL>" {
				t.Fatalf("RedactURL(%q) = %q for an unparseable URL", raw, got)
			}
			return
		}
		r, err := url.Parse(got)
		if err != nil {
			t.Fatalf("RedactURL(%q) = %q does not parse: %v", raw, got, err)
		}
		if r.User != nil || r.RawQuery != "" || r.Fragment != "" {
			t.Fatalf("RedactURL(%q) = %q still has userinfo, query or fragment", raw, got)
		}
		if r.Host != u.Host || r.Scheme != u.Scheme {
			t.Fatalf("RedactURL(%q) = %q lost the scheme or host", raw, got)
		}
		if again := rap.RedactURL(got); again != got {
			t.Fatalf("RedactURL is not idempotent: %q -> %q -> %q", raw, got, again)
		}
	})
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://rt.example/cb/123?token=abc":       "https://rt.example/cb/123",
		"http://u:p@rt.example:8080/cb#frag":        "http://rt.example:8080/cb",
		"http://rt.example/cb?":                     "http://rt.example/cb",
		"http://[::1":                               "<unparseable URL>",
		"https://rt.example/a%20b?sig=x&expires=10": "https://rt.example/a%20b",
		// A token in the path, as gorap's runtime issues them, is hidden too.
		"http://127.0.0.1:8080/rap/callback/dGhyZWFkLTE.Y2FsbC0x.c2lnbmF0dXJlc2lnbmF0dXJl": "http://127.0.0.1:8080/rap/callback/redacted",
	} {
		if got := rap.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFlushWaitsForDirectSends(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(r *http.Request, _ int) int {
		<-release
		return http.StatusOK
	})
	s := rap.NewSender(rap.SenderOptions{Logger: quietLogger()})
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Send(context.Background(), rc.srv.URL+"/cb", result(i)); err != nil {
				t.Error(err)
			}
		}()
	}
	rc.waitFor("five requests in flight", func() bool {
		_, _, total := rc.snapshot()
		return total == 5
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush with sends in flight = %v, want DeadlineExceeded", err)
	}
	close(release)
	ctx2, cancel2 := context.WithTimeout(context.Background(), waitLong)
	defer cancel2()
	if err := s.Flush(ctx2); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got, _, _ := rc.snapshot(); len(got) != 5 {
		t.Errorf("after Flush %d received, want 5", len(got))
	}
	wg.Wait()
}

// openStore opens a durable store in dir.
func openStore(t testing.TB, path string) *durable.Store {
	t.Helper()
	st, err := durable.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// runSender starts s.Run and returns a function that stops it and checks
// that it returned because of the cancellation.
func runSender(t testing.TB, s *rap.Sender) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v, want context.Canceled", err)
			}
		case <-time.After(waitLong):
			t.Errorf("Run did not return within %v of its context ending", waitLong)
		}
	}
}

func flush(t testing.TB, s *rap.Sender) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// checkOrder fails unless every path's receipts arrive in ascending
// sequence and the set of ids is exactly want, each once.
func checkExactlyOnceInOrder(t *testing.T, got []receipt, want []string) {
	t.Helper()
	seen := map[string]int{}
	last := map[string]int{}
	for _, r := range got {
		seen[r.id]++
		if prev, ok := last[r.path]; ok && r.seq < prev {
			t.Errorf("%s: %s arrived after call-%d: per-call order broken", r.path, r.id, prev)
		}
		last[r.path] = r.seq
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("%s received %d times, want exactly once", id, seen[id])
		}
		delete(seen, id)
	}
	for id, n := range seen {
		t.Errorf("unexpected message %s received %d times", id, n)
	}
}

func TestOutboxSurvivesRestart(t *testing.T) {
	// RAP IN-4: nothing is lost. Messages sent while the runtime answers
	// 503 stay in the outbox across a restart of the tool server and are
	// delivered once the runtime is healthy, each call's in order (here
	// one subscription's events per callback URL).
	//
	// Each process marks its requests, so that a request of the first one
	// still in the network when it stops is answered 503 like the others
	// rather than accepted after the switch.
	rc := newReceiver(t, func(r *http.Request, _ int) int {
		if r.Header.Get("X-Process") == "second" {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	path := filepath.Join(t.TempDir(), "tool.db")

	st := openStore(t, path)
	s1 := rap.NewSender(rap.SenderOptions{Outbox: st, Retry: fastRetry, Logger: quietLogger(), Header: http.Header{"X-Process": {"first"}}, HeaderOrigins: []string{rc.srv.URL}})
	stop := runSender(t, s1)
	var want []string
	for i := range 20 {
		u, sub := rc.srv.URL+"/a?token=x", "sub-a"
		if i%2 == 1 {
			u, sub = rc.srv.URL+"/b?token=y", "sub-b"
		}
		if err := s1.Send(context.Background(), u, laneEvent(sub, i)); err != nil {
			t.Fatalf("Send %d: %v", i, err)
		}
		want = append(want, fmt.Sprintf("%s/call-%d", sub, i))
	}
	rc.waitFor("retries against both URLs", func() bool {
		_, a, _ := rc.snapshot()
		return a["/a"] >= 3 && a["/b"] >= 3
	})
	stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	_, attempts, _ := rc.snapshot()
	if got, _, _ := rc.snapshot(); len(got) != 0 {
		t.Fatalf("received %d while the endpoint answered 503", len(got))
	}
	// Only the head of each call's queue is attempted while it fails:
	// later messages wait behind it.
	pendingBefore := attempts["/a"] + attempts["/b"]

	st2 := openStore(t, path)
	defer st2.Close()
	p, err := st2.Pending(context.Background(), 100)
	if err != nil || len(p) != 20 {
		t.Fatalf("after restart Pending = %d messages, %v; want 20", len(p), err)
	}
	if p[0].Attempts == 0 {
		t.Errorf("the first message's failed attempts were not recorded")
	}
	s2 := rap.NewSender(rap.SenderOptions{Outbox: st2, Retry: fastRetry, Logger: quietLogger(), Header: http.Header{"X-Process": {"second"}}, HeaderOrigins: []string{rc.srv.URL}})
	stop2 := runSender(t, s2)
	defer stop2()
	flush(t, s2)

	got, attempts, _ := rc.snapshot()
	checkExactlyOnceInOrder(t, got, want)
	if n := attempts["/a"] + attempts["/b"] - pendingBefore; n != 20 {
		t.Errorf("after the restart %d attempts, want 20 (one per message)", n)
	}
	rc.checkClean()
}

func TestOutboxDrops4xx(t *testing.T) {
	// RAP TR-6: a 4xx is never retried. The message leaves the outbox
	// for its dead letters (logged), and later messages to that URL
	// still go out.
	var logs lockedBuffer
	rc := newReceiver(t, func(r *http.Request, attempt int) int {
		if r.URL.Path == "/gone" && attempt == 1 {
			return http.StatusNotFound
		}
		return http.StatusOK
	})
	st := openStore(t, filepath.Join(t.TempDir(), "tool.db"))
	defer st.Close()
	s := rap.NewSender(rap.SenderOptions{Outbox: st, Retry: fastRetry, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	stop := runSender(t, s)
	defer stop()
	for i := range 3 {
		if err := s.Send(context.Background(), rc.srv.URL+"/gone?token=z", result(i)); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, s)
	got, attempts, _ := rc.snapshot()
	if attempts["/gone"] != 3 {
		t.Errorf("attempts = %d, want 3: one for the refused message, one each for the others", attempts["/gone"])
	}
	// Different calls are delivered independently, in no set order, so
	// the refused message (the first to arrive) is any of the three: it
	// is the dead letter, and each of the other two arrives once.
	seen := map[string]int{}
	for _, r := range got {
		seen[r.id]++
	}
	dl, _ := st.DeadLetters(context.Background(), 10)
	if len(dl) != 1 || dl[0].Status != http.StatusNotFound {
		t.Fatalf("dead letters %+v; want the refused message", dl)
	}
	for i := range 3 {
		id := fmt.Sprintf("call-%d", i)
		refused := strings.Contains(string(dl[0].Body), `"`+id+`"`)
		if want := map[bool]int{true: 0, false: 1}[refused]; seen[id] != want {
			t.Errorf("received %v, dead letter %s; want each message but the refused one once", seen, dl[0].Body)
		}
	}
	p, _ := st.Pending(context.Background(), 10)
	if len(p) != 0 {
		t.Errorf("outbox still holds %d messages", len(p))
	}
	if !strings.Contains(logs.String(), "status=404") || strings.Contains(logs.String(), "token=z") {
		t.Errorf("want the 404 logged with a redacted URL; logs:\n%s", logs.String())
	}
}

// outboxOnly hides every method but those of rap.Outbox, such as
// durable.Store's PendingAfter, to exercise Run with a minimal Outbox.
type outboxOnly struct{ rap.Outbox }

func TestOutboxOrderAndConcurrency(t *testing.T) {
	t.Run("SequencedOutbox", func(t *testing.T) { testOutboxOrderAndConcurrency(t, false) })
	t.Run("plain Outbox", func(t *testing.T) { testOutboxOrderAndConcurrency(t, true) })
}

func testOutboxOrderAndConcurrency(t *testing.T, plain bool) {
	// A subscription's events arrive in the order they were sent even
	// when some attempts fail, while different subscriptions (here one
	// per callback URL) are delivered concurrently, at most
	// rap.MaxInFlight at a time.
	const urls, perURL = 24, 10
	var mu sync.Mutex
	failed := map[string]bool{}
	rc := newReceiver(t, func(r *http.Request, _ int) int {
		time.Sleep(2 * time.Millisecond)
		key := r.Header.Get(rap.IdempotencyKeyHeader)
		mu.Lock()
		defer mu.Unlock()
		// Every third message fails once.
		if !failed[key] && len(failed)%3 == 0 {
			failed[key] = true
			return http.StatusInternalServerError
		}
		failed[key] = true
		return http.StatusOK
	})
	st := openStore(t, filepath.Join(t.TempDir(), "tool.db"))
	defer st.Close()
	var ob rap.Outbox = st
	if plain {
		ob = outboxOnly{st}
	}
	s := rap.NewSender(rap.SenderOptions{Outbox: ob, Retry: fastRetry, Logger: quietLogger()})
	var want []string
	for i := range perURL {
		for u := range urls {
			seq := i*urls + u
			sub := fmt.Sprintf("sub-%d", u)
			if err := s.Send(context.Background(), fmt.Sprintf("%s/sub/%d", rc.srv.URL, u), laneEvent(sub, seq)); err != nil {
				t.Fatal(err)
			}
			want = append(want, fmt.Sprintf("%s/call-%d", sub, seq))
		}
	}
	stop := runSender(t, s)
	defer stop()
	flush(t, s)
	got, _, _ := rc.snapshot()
	checkExactlyOnceInOrder(t, got, want)
	rc.mu.Lock()
	maxAct := rc.maxAct
	rc.mu.Unlock()
	if maxAct < 2 || maxAct > rap.MaxInFlight {
		t.Errorf("at most %d callbacks were in flight at once; want between 2 and %d", maxAct, rap.MaxInFlight)
	}
	rc.checkClean()
}

func TestOutboxSubscriptionEventsKeepOrder(t *testing.T) {
	// RAP SU-2, SU-4: events reach the runtime in the order the tool
	// emitted them, and nothing arrives after the final event, even when
	// some deliveries fail and are retried.
	var mu sync.Mutex
	var seen []string
	failedOnce := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cb, err := rap.DecodeCallback(body)
		ev, ok := cb.(*rap.SubscriptionEvent)
		if err != nil || !ok {
			http.Error(w, "not a subscription_event", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		n, _ := strconv.Atoi(ev.Text)
		if n%5 == 0 && !failedOnce[ev.Text] {
			failedOnce[ev.Text] = true
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		label := ev.Text
		if ev.Final {
			label = "final"
		}
		seen = append(seen, label)
	}))
	defer srv.Close()

	st := openStore(t, filepath.Join(t.TempDir(), "tool.db"))
	defer st.Close()
	s := rap.NewSender(rap.SenderOptions{Outbox: st, Retry: fastRetry, Logger: quietLogger()})
	stop := runSender(t, s)
	defer stop()
	var want []string
	for i := range 30 {
		ev := &rap.SubscriptionEvent{GroupID: "thread-1", ToolCallID: "call-sub", Text: strconv.Itoa(i), Final: i == 29}
		if err := s.Send(context.Background(), srv.URL+"/cb?token=t", ev); err != nil {
			t.Fatal(err)
		}
		if ev.Final {
			want = append(want, "final")
		} else {
			want = append(want, ev.Text)
		}
	}
	flush(t, s)
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("events arrived as\n%v\nwant\n%v", seen, want)
	}
}

func TestOutboxDrainsLargeBacklog(t *testing.T) {
	// More messages than Run holds in memory are pending at start (as
	// after a long runtime outage); every one is delivered exactly once,
	// each call's in order (one subscription per URL).
	const urls, perURL = 50, 100
	rc := newReceiver(t, always(http.StatusOK))
	st := openStore(t, filepath.Join(t.TempDir(), "tool.db"))
	defer st.Close()
	s := rap.NewSender(rap.SenderOptions{Outbox: st, Logger: quietLogger()})
	// One goroutine per URL, so that order per URL is defined while the
	// store commits the goroutines' writes together.
	var wg sync.WaitGroup
	var want []string
	for u := range urls {
		for i := range perURL {
			want = append(want, fmt.Sprintf("sub-%d/call-%d", u, u*perURL+i))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perURL {
				if err := s.Send(context.Background(), fmt.Sprintf("%s/sub/%d", rc.srv.URL, u), laneEvent(fmt.Sprintf("sub-%d", u), u*perURL+i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	stop := runSender(t, s)
	defer stop()
	flush(t, s)
	got, _, _ := rc.snapshot()
	checkExactlyOnceInOrder(t, got, want)
	rc.checkClean()
}

func TestOutboxSendEnqueuesWithoutRun(t *testing.T) {
	// With an outbox, Send returns once the message is durable; no request
	// is made until Run.
	rc := newReceiver(t, always(http.StatusOK))
	st := openStore(t, filepath.Join(t.TempDir(), "tool.db"))
	defer st.Close()
	s := rap.NewSender(rap.SenderOptions{Outbox: st, Logger: quietLogger()})
	if err := s.Send(context.Background(), rc.srv.URL+"/cb", result(1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Flush without Run = %v, want DeadlineExceeded", err)
	}
	if _, _, total := rc.snapshot(); total != 0 {
		t.Errorf("endpoint saw %d requests before Run", total)
	}
	p, err := st.Pending(context.Background(), 10)
	if err != nil || len(p) != 1 {
		t.Fatalf("Pending = %v, %v; want the message", p, err)
	}
	want, _ := json.Marshal(result(1))
	if !bytes.Equal(p[0].Body, want) || p[0].Key == "" {
		t.Errorf("stored %q with key %q; want body %s and a key", p[0].Body, p[0].Key, want)
	}
	stop := runSender(t, s)
	defer stop()
	flush(t, s)
	if got, _, _ := rc.snapshot(); len(got) != 1 || got[0].key != p[0].Key {
		t.Errorf("received %v, want the message once with key %s", got, p[0].Key)
	}
}

func TestRunOncePerSender(t *testing.T) {
	rc := newReceiver(t, always(http.StatusOK))
	st := openStore(t, filepath.Join(t.TempDir(), "tool.db"))
	defer st.Close()
	s := rap.NewSender(rap.SenderOptions{Outbox: st, Logger: quietLogger()})
	stop := runSender(t, s)
	defer stop()
	// A delivered message proves the first Run is under way.
	if err := s.Send(context.Background(), rc.srv.URL, result(1)); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := s.Run(ctx); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("a second Run returned %v, want an already-running error", err)
	}
}

func TestRunWithoutOutboxWaits(t *testing.T) {
	s := rap.NewSender(rap.SenderOptions{Logger: quietLogger()})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run = %v, want DeadlineExceeded", err)
	}
}

func ExampleNewSender() {
	// A stand-in for the runtime's callback endpoint.
	runtime := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("runtime got %s\n", body)
	}))
	defer runtime.Close()

	dir, _ := os.MkdirTemp("", "gorap-example")
	defer os.RemoveAll(dir)

	// The outbox keeps results until the runtime has them, across crashes.
	store, err := durable.Open(filepath.Join(dir, "tool.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	sender := rap.NewSender(rap.SenderOptions{Outbox: store, Logger: slog.New(slog.DiscardHandler)})

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error)
	go func() { done <- sender.Run(ctx) }()

	// Send returns as soon as the result is durable; Run delivers it.
	err = sender.Send(ctx, runtime.URL+"/callback?token=secret", &rap.ToolResult{
		GroupID: "thread-1",
		ID:      "call-1",
		Text:    "42",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := sender.Flush(ctx); err != nil {
		fmt.Println(err)
	}
	stop()
	<-done
	// Output:
	// runtime got {"type":"tool_result","group_id":"thread-1","id":"call-1","text":"42"}
}
