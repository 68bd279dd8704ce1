package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// MaxCallbackBytes is the largest callback body the kit's callback endpoint
// accepts; a larger one is answered 413 and recorded as too large.
const MaxCallbackBytes = 8 << 20

// callbackSink is the callback endpoint the kit hosts for the tool server
// under test. Every invocation gets its own inbox at an unguessable URL
// (a random path and a random query key); what the sink receives there is
// recorded on the check that owns the inbox, and answered as the inbox's
// plan says: 200 by default, or an error status, a stall or an oversized
// body when a check tests how the server copes.
type callbackSink struct {
	srv     *http.Server
	ln      net.Listener
	public  string // base URL the server under test posts to
	ctx     context.Context
	stop    context.CancelFunc
	mu      sync.Mutex
	inboxes map[string]*inbox
	strays  []received // requests to no inbox, or with the wrong key
}

// answer is how the sink answers one callback.
type answer struct {
	status int
	// hold delays the answer until the channel is closed or the check
	// ends.
	hold <-chan struct{}
	// hugeBody, when positive, is how many bytes of body to send with the
	// answer, at about 6 MB/s.
	hugeBody int64
	// stop ends a huge body early.
	stop <-chan struct{}
}

// received is one callback as the sink saw it.
type received struct {
	at      time.Time
	path    string
	query   url.Values
	header  http.Header
	body    []byte
	msg     map[string]any // nil when the body is not a JSON object
	decErr  error
	tooBig  bool
	attempt int // 1 for the first callback of the inbox
	status  int // what the sink answered
	// urlChanged: the callback reached the inbox's path without the
	// inbox's query key, or by another method than POST.
	urlChanged bool
}

// msgType returns the message's "type", or "".
func (r received) msgType() string {
	s, _ := r.msg["type"].(string)
	return s
}

// inbox collects the callbacks of one invocation.
type inbox struct {
	token, key string
	url        string
	ch         chan received
	mu         sync.Mutex
	t          *T
	plan       func(attempt int) answer
	n          int
}

// startSink listens on addr and serves the callback endpoint. public, when
// not empty, is the base URL the tool server must use to reach it.
func startSink(addr, public string) (*callbackSink, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the kit cannot listen for callbacks on %s: %w (choose another address with --callback-listen)", addr, err)
	}
	if public == "" {
		public = "http://" + ln.Addr().String()
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &callbackSink{ln: ln, public: strings.TrimRight(public, "/"), ctx: ctx, stop: stop, inboxes: map[string]*inbox{}}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelError),
	}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// close stops the sink; held answers are released.
func (s *callbackSink) close() {
	s.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	_ = s.srv.Close()
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newInbox makes an inbox owned by t, answering 200 to everything.
func (s *callbackSink) newInbox(t *T) *inbox {
	ib := &inbox{token: randomToken(16), key: randomToken(16), ch: make(chan received, 64), t: t}
	ib.url = s.public + "/rap-callback/" + ib.token + "?k=" + ib.key
	s.mu.Lock()
	s.inboxes[ib.token] = ib
	s.mu.Unlock()
	return ib
}

// setT hands the inbox to another check: later callbacks are recorded there.
func (ib *inbox) setT(t *T) {
	ib.mu.Lock()
	ib.t = t
	ib.mu.Unlock()
}

// setPlan sets how the inbox answers its callbacks from now on.
func (ib *inbox) setPlan(p func(attempt int) answer) {
	ib.mu.Lock()
	ib.plan = p
	ib.mu.Unlock()
}

// next waits up to wait for the inbox's next callback.
func (ib *inbox) next(ctx context.Context, wait time.Duration) (received, bool) {
	tm := time.NewTimer(wait)
	defer tm.Stop()
	select {
	case r := <-ib.ch:
		return r, true
	case <-tm.C:
	case <-ctx.Done():
	}
	return received{}, false
}

// strayList returns the requests that reached the sink outside an inbox,
// or without its key.
func (s *callbackSink) strayList() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.strays...)
}

func (s *callbackSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := received{at: time.Now(), path: r.URL.Path, query: r.URL.Query(), header: r.Header.Clone()}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxCallbackBytes+1))
	if err != nil {
		rec.decErr = err
	}
	if len(body) > MaxCallbackBytes {
		rec.tooBig = true
		body = body[:MaxCallbackBytes]
	}
	rec.body = body
	if !rec.tooBig && err == nil {
		var m map[string]any
		if derr := json.Unmarshal(body, &m); derr != nil {
			rec.decErr = derr
		} else if m == nil {
			rec.decErr = errors.New("the body is null, not a JSON object")
		} else {
			rec.msg = m
		}
	}

	token := strings.TrimPrefix(r.URL.Path, "/rap-callback/")
	s.mu.Lock()
	ib := s.inboxes[token]
	if ib != nil && (r.URL.Query().Get("k") != ib.key || r.Method != http.MethodPost) {
		rec.urlChanged = true
		s.strays = append(s.strays, rec)
	}
	if ib == nil {
		rec.status = http.StatusNotFound
		s.strays = append(s.strays, rec)
		s.mu.Unlock()
		http.Error(w, `{"error":"no such callback URL: post to the callback_url of the invocation, unchanged"}`, http.StatusNotFound)
		return
	}
	s.mu.Unlock()

	ib.mu.Lock()
	ib.n++
	rec.attempt = ib.n
	plan, t := ib.plan, ib.t
	ib.mu.Unlock()
	a := answer{status: http.StatusOK}
	if plan != nil {
		a = plan(rec.attempt)
	}
	if rec.tooBig {
		a = answer{status: http.StatusRequestEntityTooLarge}
	}
	rec.status = a.status
	if t != nil {
		t.Record(ReceivedExchange(r, body, a.status))
	}
	select {
	case ib.ch <- rec:
	default: // a flood of callbacks: the checks have seen enough
	}
	if a.hold != nil {
		select {
		case <-a.hold:
		case <-s.ctx.Done():
		case <-r.Context().Done():
		}
	}
	if a.hugeBody > 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		// A reader that stops reading leaves the writes blocked: the
		// write deadline ends them when the check stops the body.
		rc := http.NewResponseController(w)
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-a.stop:
			case <-s.ctx.Done():
			case <-done:
				return
			}
			_ = rc.SetWriteDeadline(time.Now())
		}()
		chunk := []byte(strings.Repeat(" ", 64<<10))
		tick := time.NewTicker(10 * time.Millisecond) // about 6 MB/s
		defer tick.Stop()
		for sent := int64(0); sent < a.hugeBody; sent += int64(len(chunk)) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			_ = rc.Flush()
			select {
			case <-tick.C:
			case <-a.stop:
				return
			case <-s.ctx.Done():
				return
			}
		}
		return
	}
	if a.status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = fmt.Fprintf(w, `{"error":"the conformance kit answered %d on purpose"}`, a.status)
		return
	}
	w.WriteHeader(http.StatusOK)
}
