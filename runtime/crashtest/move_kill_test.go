package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	rapclient "github.com/gorap/gorap/runtime/client"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// moveScript answers every user message with "re: " and the message, and
// never calls a tool, so that a history is easy to check.
const moveScript = `{"turns": [{"text": "re: {{last_user}}", "repeat": true}]}`

// Bounds of the move crash test.
const (
	// holdWithin bounds the wait for a request to reach a hold.
	holdWithin = 30 * time.Second
	// resolveWithin bounds the wait for a session to have exactly one
	// owner again: a source asks a silent destination every 5 s.
	resolveWithin = 30 * time.Second
)

// noRedirect is a client of the runtimes' API that shows a 308 as it is.
var noRedirect = &http.Client{
	Timeout:       5 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// moveClient sends the client's move request, which lasts as long as the
// move (a held step included).
var moveClient = &http.Client{Timeout: 2 * time.Minute}

// reply is what a held request got from the destination.
type reply struct {
	status int
	body   []byte
	ctype  string
	err    error
}

// action is what a held request does when the test releases it.
type action int

const (
	// pass lets the request go on: forwarded, or its answer delivered.
	pass action = iota
	// fail breaks the source's connection; nothing more is forwarded.
	fail
	// detach breaks the source's connection at once and keeps the
	// request, which goes on to the destination only when the test
	// releases it again (with pass): a request the network delivers late.
	detach
)

// hold stops one request at a known point until the test releases it
// with an action.
type hold struct {
	// reached gets the request once it is at the point; for a hold after
	// forwarding, with the destination's answer.
	reached chan reply
	release chan action
	// forwarded gets the destination's answer to a request held before
	// forwarding and then let go on.
	forwarded chan reply
}

func newHold() *hold {
	return &hold{reached: make(chan reply, 1), release: make(chan action, 1), forwarded: make(chan reply, 1)}
}

// wait blocks the request until the test decides, or ends (done: fail).
func (h *hold) wait(done <-chan struct{}) action {
	select {
	case a := <-h.release:
		return a
	case <-done:
		return fail
	}
}

// await waits for the request to reach the hold.
func (h *hold) await(t *testing.T, what string) reply {
	t.Helper()
	select {
	case r := <-h.reached:
		return r
	case <-time.After(holdWithin):
		t.Fatalf("%s did not arrive within %v", what, holdWithin)
		return reply{}
	}
}

// awaitForwarded waits for the destination's answer to a request let go on.
func (h *hold) awaitForwarded(t *testing.T, what string) reply {
	t.Helper()
	select {
	case r := <-h.forwarded:
		return r
	case <-time.After(holdWithin):
		t.Fatalf("%s was not answered by the destination within %v", what, holdWithin)
		return reply{}
	}
}

// holdPoint names where a request of the move protocol is held: its step
// ("prepare", "commit", "status" or "abort"), before or after it is
// forwarded to the destination.
type holdPoint struct {
	step  string
	after bool
}

// moveProxy stands between the source runtime and the destination: it
// forwards every request of the move protocol, and holds the next request
// of a step where the test asked.
type moveProxy struct {
	target string
	srv    *httptest.Server
	done   chan struct{}
	hc     *http.Client

	mu    sync.Mutex
	holds map[holdPoint]*hold
	seen  []string // the steps, in order
}

func newMoveProxy(t *testing.T, target string) *moveProxy {
	p := &moveProxy{target: target, done: make(chan struct{}), holds: map[holdPoint]*hold{}, hc: &http.Client{Timeout: 60 * time.Second}}
	p.srv = httptest.NewServer(p)
	t.Cleanup(func() {
		close(p.done)
		p.srv.Close()
	})
	return p
}

// URL is the address the source is told to move the session to.
func (p *moveProxy) URL() string { return p.srv.URL }

// holdNext holds the next request of step, before or after forwarding it.
func (p *moveProxy) holdNext(step string, after bool) *hold {
	h := newHold()
	p.mu.Lock()
	p.holds[holdPoint{step, after}] = h
	p.mu.Unlock()
	return h
}

func (p *moveProxy) take(step string, after bool) *hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.holds[holdPoint{step, after}]
	delete(p.holds, holdPoint{step, after})
	return h
}

// steps returns the steps the proxy saw, in order.
func (p *moveProxy) steps() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

func stepOf(r *http.Request) string {
	if r.URL.Path == "/v1/migrations" {
		return "prepare"
	}
	return path.Base(r.URL.Path)
}

func (p *moveProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	step := stepOf(r)
	p.mu.Lock()
	p.seen = append(p.seen, step)
	p.mu.Unlock()
	if h := p.take(step, false); h != nil {
		h.reached <- reply{}
		act := h.wait(p.done)
		if act == detach {
			breakConn(w)
			if act = h.wait(p.done); act == pass {
				h.forwarded <- p.forward(r, body)
			}
			return
		}
		if act != pass {
			panic(http.ErrAbortHandler) // the source sees a broken connection
		}
		a := p.forward(r, body)
		h.forwarded <- a
		p.answer(w, a)
		return
	}
	a := p.forward(r, body)
	if h := p.take(step, true); h != nil {
		h.reached <- a
		if h.wait(p.done) != pass {
			panic(http.ErrAbortHandler)
		}
	}
	p.answer(w, a)
}

// breakConn closes the connection of the request w answers, without an
// answer.
func breakConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// forward sends the request to the destination, even when the source is
// gone meanwhile.
func (p *moveProxy) forward(r *http.Request, body []byte) reply {
	req, err := http.NewRequestWithContext(context.Background(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return reply{err: err}
	}
	for _, h := range []string{"Content-Type", "Authorization"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, body: b, ctype: resp.Header.Get("Content-Type"), err: err}
}

func (p *moveProxy) answer(w http.ResponseWriter, a reply) {
	if a.err != nil {
		http.Error(w, "the destination cannot be reached: "+a.err.Error(), http.StatusBadGateway)
		return
	}
	if a.ctype != "" {
		w.Header().Set("Content-Type", a.ctype)
	}
	w.WriteHeader(a.status)
	w.Write(a.body)
}

// statefulTools is a tool server built with the SDK whose toolset needs
// migration (RAP MI-1): its /migrate succeeds at once, or waits while the
// test holds it.
type statefulTools struct {
	url  string
	done chan struct{}

	mu       sync.Mutex
	next     *hold
	migrated []rap.MigrateRequest
}

func newStatefulTools(t *testing.T) *statefulTools {
	st := &statefulTools{done: make(chan struct{})}
	srv := rap.NewServer("state", &rap.ServerOptions{
		Description: "Keeps state that moves with its session.",
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Migrator: func(ctx context.Context, req *rap.MigrateRequest) error {
			st.mu.Lock()
			h := st.next
			st.next = nil
			st.mu.Unlock()
			if h != nil {
				h.reached <- reply{}
				if h.wait(st.done) != pass {
					return fmt.Errorf("the test failed this migration")
				}
			}
			st.mu.Lock()
			st.migrated = append(st.migrated, *req)
			st.mu.Unlock()
			return nil
		},
	})
	rap.AddTool(srv, &rap.Tool{Name: "keep", Description: "Keeps nothing; no model calls it.", InputSchema: rap.EmptyObjectSchema},
		func(context.Context, *rap.Call, struct{}) (*rap.Reply, error) { return rap.Text("kept"), nil })
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := httptest.NewServer(srv)
	st.url = h.URL
	t.Cleanup(func() {
		close(st.done)
		h.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return st
}

// holdMigrate holds the next POST /migrate.
func (st *statefulTools) holdMigrate() *hold {
	h := newHold()
	st.mu.Lock()
	st.next = h
	st.mu.Unlock()
	return h
}

// rapProc is one runtime of the move: "rap serve" on its own data
// directory, restarted on the same port.
type rapProc struct {
	name, bin, listen, dataDir, cfg, model, logPath string
	env                                             []string
	p                                               *serveProcess
	base                                            string
}

func (rp *rapProc) start(t *testing.T) {
	t.Helper()
	rp.p, rp.base = startServeWith(t, rp.bin, rp.listen, rp.dataDir, rp.cfg, rp.model, rp.env, rp.logPath)
	rp.listen = strings.TrimPrefix(rp.base, "http://") // callback URLs point at this port
}

func (rp *rapProc) kill() {
	if rp.p != nil {
		rp.p.kill()
		rp.p = nil
	}
}

// moveRig is one source runtime, one destination behind the proxy, each
// with a tool server of the toolset "state", and a session at the source.
type moveRig struct {
	t                  *testing.T
	src, dst           *rapProc
	srcTools, dstTools *statefulTools
	proxy              *moveProxy
	root               string

	mu       sync.Mutex
	accepted []string // answered 2xx: each must appear exactly once at the owner
	refused  []string // answered otherwise: none may appear
}

// newMoveRig starts both runtimes (dstEnv is the destination's extra
// environment), creates a session at the source and has one exchange in it.
func newMoveRig(t *testing.T, bin string, dstEnv []string) *moveRig {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	if err := os.WriteFile(script, []byte(moveScript), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &moveRig{t: t, srcTools: newStatefulTools(t), dstTools: newStatefulTools(t)}
	mk := func(name, toolsURL string, env []string) *rapProc {
		cfg := filepath.Join(dir, name+".json")
		os.WriteFile(cfg, []byte(fmt.Sprintf(`{"tool_sets":[{"type":"toolset_server","server_url":%q}]}`, toolsURL)), 0o600)
		return &rapProc{name: name, bin: bin, listen: "127.0.0.1:0", dataDir: filepath.Join(dir, name), cfg: cfg,
			model: "scripted:" + script, logPath: filepath.Join(dir, name+".log"), env: env}
	}
	g.src, g.dst = mk("source", g.srcTools.url, nil), mk("destination", g.dstTools.url, dstEnv)
	g.dst.start(t)
	g.src.start(t)
	g.proxy = newMoveProxy(t, g.dst.base)
	t.Cleanup(func() {
		g.src.kill()
		g.dst.kill()
		if t.Failed() {
			t.Logf("proxy saw: %v", g.proxy.steps())
			t.Logf("source log (tail):\n%s", tail(g.src.logPath))
			t.Logf("destination log (tail):\n%s", tail(g.dst.logPath))
		}
	})
	th, err := apiClient(t, g.src.base).CreateThread(context.Background(), api.CreateThreadRequest{})
	if err != nil {
		t.Fatalf("create a session at the source: %v", err)
	}
	g.root = th.ID
	g.mustAccept(g.src, "before the move")
	g.waitAnswered(g.src)
	return g
}

// postMessage posts text to the session at rp.
func (g *moveRig) postMessage(rp *rapProc, text string) (int, error) {
	b, _ := json.Marshal(api.PostMessageRequest{Text: &text})
	resp, err := noRedirect.Post(rp.base+"/v1/threads/"+g.root+"/messages", "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// mustAccept posts text to rp, which must take it.
func (g *moveRig) mustAccept(rp *rapProc, text string) {
	g.t.Helper()
	code, err := g.postMessage(rp, text)
	if err != nil || code/100 != 2 {
		g.t.Fatalf("message %q to the %s: %d %v; want it taken", text, rp.name, code, err)
	}
	g.mu.Lock()
	g.accepted = append(g.accepted, text)
	g.mu.Unlock()
}

// mustRefuse posts text to rp, which must answer want and keep nothing.
func (g *moveRig) mustRefuse(rp *rapProc, text string, want int) {
	g.t.Helper()
	code, err := g.postMessage(rp, text)
	if err != nil || code != want {
		g.t.Fatalf("message %q to the %s: %d %v; want %d", text, rp.name, code, err, want)
	}
	g.mu.Lock()
	g.refused = append(g.refused, text)
	g.mu.Unlock()
}

// moveResult is the source's answer to the client's move request.
type moveResult struct {
	status int
	body   string
	err    error
}

// startMove asks the source to move the session to the proxy.
func (g *moveRig) startMove() <-chan moveResult {
	out := make(chan moveResult, 1)
	go func() {
		b, _ := json.Marshal(api.MoveRequest{To: g.proxy.URL()})
		resp, err := moveClient.Post(g.src.base+"/v1/threads/"+g.root+"/migrate", "application/json", bytes.NewReader(b))
		if err != nil {
			out <- moveResult{err: err}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		out <- moveResult{status: resp.StatusCode, body: string(body)}
	}()
	return out
}

// awaitMove waits for the source's answer to the move request.
func (g *moveRig) awaitMove(mv <-chan moveResult) moveResult {
	g.t.Helper()
	select {
	case r := <-mv:
		return r
	case <-time.After(holdWithin):
		g.t.Fatalf("the source did not answer the move request within %v", holdWithin)
		return moveResult{}
	}
}

// threadStatus is the status of GET /v1/threads/{root} at rp, and its
// Location.
func (g *moveRig) threadStatus(rp *rapProc) (int, string, error) {
	resp, err := noRedirect.Get(rp.base + "/v1/threads/" + g.root)
	if err != nil {
		return 0, "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

// waitAnswered waits until the session at rp has no input left and the
// message accepted last (posted to rp after all others) is in its history
// and answered, and returns the history; checkHistory then tells which
// accepted messages are missing, if any.
func (g *moveRig) waitAnswered(rp *rapProc) []api.Message {
	g.t.Helper()
	c := apiClient(g.t, rp.base)
	g.mu.Lock()
	lastText := g.accepted[len(g.accepted)-1]
	g.mu.Unlock()
	var h []api.Message
	pollUntil(g.t, resolveWithin, fmt.Sprintf("the answer to %q at the %s", lastText, rp.name), func() (bool, string) {
		info, err := c.Thread(context.Background(), g.root)
		if err != nil || info.Queued != 0 {
			return false, fmt.Sprintf("thread: %+v %v", info, err)
		}
		if h, err = c.History(context.Background(), g.root); err != nil || len(h) == 0 || h[len(h)-1].Role != api.RoleAssistant {
			return false, fmt.Sprintf("history: %d messages, %v", len(h), err)
		}
		if !slices.ContainsFunc(h, func(m api.Message) bool { return m.Role == api.RoleUser && m.Text == lastText }) {
			return false, fmt.Sprintf("%q is not in the history", lastText)
		}
		return true, ""
	})
	return h
}

// pollUntil polls cond until it holds, and fails the test after d with
// what cond last said.
func pollUntil(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s", d, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkHistory asserts that every accepted message is in h exactly once,
// no refused one is, and the model answered each turn.
func (g *moveRig) checkHistory(rp *rapProc, h []api.Message) {
	g.t.Helper()
	users := map[string]int{}
	for i, m := range h {
		if m.Seq != int64(i+1) {
			g.t.Errorf("%s: message %d has seq %d (gap or reorder)", rp.name, i, m.Seq)
		}
		switch m.Role {
		case api.RoleUser:
			users[m.Text]++
		case api.RoleAssistant:
			if !strings.HasPrefix(m.Text, "re: ") || len(m.ToolCalls) > 0 {
				g.t.Errorf("%s: assistant message %q is not a whole scripted answer", rp.name, m.Text)
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, text := range g.accepted {
		if users[text] != 1 {
			g.t.Errorf("%s: accepted message %q appears %d times in the history, want exactly once", rp.name, text, users[text])
		}
		delete(users, text)
	}
	for _, text := range g.refused {
		if users[text] != 0 {
			g.t.Errorf("%s: refused message %q appears %d times in the history, want none", rp.name, text, users[text])
		}
		delete(users, text)
	}
	for text, n := range users {
		g.t.Errorf("%s: unexpected user message %q (%d times)", rp.name, text, n)
	}
}

// checkNoThreads asserts that rp holds no thread at all: nothing
// half-imported, nothing left behind.
func (g *moveRig) checkNoThreads(rp *rapProc) {
	g.t.Helper()
	page, err := apiClient(g.t, rp.base).ListThreads(context.Background(), rapclient.ListOptions{})
	if err != nil {
		g.t.Fatalf("list the threads at the %s: %v", rp.name, err)
	}
	if len(page.Threads) != 0 {
		g.t.Errorf("the %s holds %d threads (%+v); want none", rp.name, len(page.Threads), page.Threads)
	}
}

// resolve waits until the move ended one way or the other, as the source
// says: it answers 308 for the session (moved), or takes a message again
// (stayed; the message is accepted). While it is frozen it answers 503;
// such messages are refused and must appear nowhere.
func (g *moveRig) resolve() (moved bool) {
	g.t.Helper()
	k := 0
	pollUntil(g.t, resolveWithin, "the move to end one way or the other", func() (bool, string) {
		if code, _, err := g.threadStatus(g.src); err == nil && code == http.StatusPermanentRedirect {
			moved = true
			return true, ""
		}
		k++
		text := fmt.Sprintf("after the move %d", k)
		code, err := g.postMessage(g.src, text)
		g.mu.Lock()
		defer g.mu.Unlock()
		switch {
		case err == nil && code/100 == 2:
			g.accepted = append(g.accepted, text)
			return true, ""
		case err == nil && (code == http.StatusServiceUnavailable || code == http.StatusPermanentRedirect):
			g.refused = append(g.refused, text)
			time.Sleep(200 * time.Millisecond)
			return false, fmt.Sprintf("a message to the source got %d", code)
		}
		g.t.Fatalf("message %q to the source: %d %v; want it taken, 503 while the session is frozen, or 308", text, code, err)
		return false, ""
	})
	return moved
}

// checkOneOwner asserts that the move ended either way, with the session
// in one place only.
func (g *moveRig) checkOneOwner() {
	g.t.Helper()
	if g.resolve() {
		g.checkMovedNow()
	} else {
		g.checkStayedNow()
	}
}

// checkStayed asserts that the session ended at the source only: the
// source takes messages again, answers every accepted one exactly once,
// and the destination holds nothing of the session.
func (g *moveRig) checkStayed() {
	g.t.Helper()
	if g.resolve() {
		g.t.Fatalf("the session moved to the destination; want it to stay at the source")
	}
	g.checkStayedNow()
}

func (g *moveRig) checkStayedNow() {
	g.t.Helper()
	g.checkHistory(g.src, g.waitAnswered(g.src))
	if code, loc, err := g.threadStatus(g.src); err != nil || code != http.StatusOK {
		g.t.Errorf("GET the session at the source: %d %q %v; want 200", code, loc, err)
	}
	if code, _, err := g.threadStatus(g.dst); err != nil || code != http.StatusNotFound {
		g.t.Errorf("the session is at the source, and GET it at the destination answers %d %v; want 404", code, err)
	}
	g.checkNoThreads(g.dst)
}

// checkMoved asserts that the session ended at the destination only: the
// source answers for it with 308 to where it went, takes no message and
// holds no thread; the destination answers every accepted message exactly
// once and takes a new one.
func (g *moveRig) checkMoved() {
	g.t.Helper()
	if !g.resolve() {
		g.t.Fatalf("the session stayed at the source; want it moved to the destination")
	}
	g.checkMovedNow()
}

func (g *moveRig) checkMovedNow() {
	g.t.Helper()
	want := g.proxy.URL() + "/v1/threads/" + g.root
	if code, loc, err := g.threadStatus(g.src); err != nil || code != http.StatusPermanentRedirect || loc != want {
		g.t.Errorf("GET the session at the source: %d %q %v; want 308 to %s", code, loc, err, want)
	}
	g.mustRefuse(g.src, "to the old address", http.StatusPermanentRedirect)
	g.checkNoThreads(g.src)
	g.mustAccept(g.dst, "after the move")
	g.checkHistory(g.dst, g.waitAnswered(g.dst))
	if code, _, err := g.threadStatus(g.dst); err != nil || code != http.StatusOK {
		g.t.Errorf("GET the session at the destination: %d %v; want 200", code, err)
	}
}

// TestSIGKILLDuringMoveLeavesTheSessionInOnePlace kills the source or the
// destination runtime of a session's move (POST /v1/threads/{id}/migrate)
// at each step, holding the step's request in a proxy between them (or in
// the tool server's /migrate) so that the kill lands where it is meant to,
// restarts it on the same data directory and port, and checks that the
// move ended one way or the other: exactly one runtime holds the session,
// every message either runtime accepted is in its history exactly once and
// answered, and the other runtime holds nothing of it (404, or 308 to
// where it went at the source).
func TestSIGKILLDuringMoveLeavesTheSessionInOnePlace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rap and runs 12 rap serve processes")
	}
	bin := buildRap(t, t.TempDir())

	// Before the commit, a source that stops undoes the move when it
	// starts again; a message it took while paused stays with it.
	t.Run("source killed while the destination prepares", func(t *testing.T) {
		g := newMoveRig(t, bin, nil)
		prep := g.proxy.holdNext("prepare", false)
		mv := g.startMove()
		prep.await(t, "the prepare request")
		g.mustAccept(g.src, "during the pause")
		g.src.kill()
		prep.release <- pass // the destination records a move that will never commit
		if a := prep.awaitForwarded(t, "the prepare request"); a.err != nil || a.status != http.StatusOK {
			t.Fatalf("the destination answered the prepare request: %d %s %v; want 200", a.status, a.body, a.err)
		}
		if r := g.awaitMove(mv); r.err == nil {
			t.Fatalf("the killed source answered the move request: %d %s", r.status, r.body)
		}
		g.src.start(t)
		g.checkStayed()
	})
	t.Run("source killed while its tool server migrates", func(t *testing.T) {
		g := newMoveRig(t, bin, nil)
		mig := g.srcTools.holdMigrate()
		mv := g.startMove()
		mig.await(t, "POST /migrate")
		g.mustAccept(g.src, "during the pause")
		g.src.kill()
		mig.release <- pass
		if r := g.awaitMove(mv); r.err == nil {
			t.Fatalf("the killed source answered the move request: %d %s", r.status, r.body)
		}
		g.src.start(t)
		g.checkStayed()
	})
	// Sent but not committed: the restarted source asks, the destination
	// says "arriving", the source calls the move off and keeps the session.
	// The commit, delivered after the abort, is refused.
	t.Run("source killed before the destination got the commit", func(t *testing.T) {
		g := newMoveRig(t, bin, nil)
		mig := g.srcTools.holdMigrate()
		commit := g.proxy.holdNext("commit", false)
		mv := g.startMove()
		mig.await(t, "POST /migrate")
		g.mustAccept(g.src, "during the pause")
		mig.release <- pass
		commit.await(t, "the commit request")
		g.mustRefuse(g.src, "while the session is sent", http.StatusServiceUnavailable)
		g.src.kill()
		if r := g.awaitMove(mv); r.err == nil {
			t.Fatalf("the killed source answered the move request: %d %s", r.status, r.body)
		}
		commit.release <- detach
		g.src.start(t)
		g.checkStayed()
		commit.release <- pass
		if a := commit.awaitForwarded(t, "the commit delivered after the abort"); a.err != nil || a.status != http.StatusConflict {
			t.Errorf("the destination answered a commit delivered after the abort %d %s %v; want 409", a.status, a.body, a.err)
		}
		g.checkNoThreads(g.dst)
	})
	// Committed, answer lost: the restarted source asks, the destination
	// says "arrived", the source finishes the move.
	t.Run("source killed after the destination committed", func(t *testing.T) {
		g := newMoveRig(t, bin, nil)
		mig := g.srcTools.holdMigrate()
		commit := g.proxy.holdNext("commit", true)
		mv := g.startMove()
		mig.await(t, "POST /migrate")
		g.mustAccept(g.src, "during the pause")
		mig.release <- pass
		if a := commit.await(t, "the commit's answer"); a.err != nil || a.status != http.StatusOK {
			t.Fatalf("the destination answered the commit: %d %s %v; want 200", a.status, a.body, a.err)
		}
		g.mustRefuse(g.src, "while the session is sent", http.StatusServiceUnavailable)
		g.src.kill()
		commit.release <- fail
		if r := g.awaitMove(mv); r.err == nil {
			t.Fatalf("the killed source answered the move request: %d %s", r.status, r.body)
		}
		g.src.start(t)
		g.checkMoved()
	})
	// The destination dies before it commits: the source cannot tell, stays
	// frozen, and undoes the move once the destination is back and says
	// "arriving".
	t.Run("destination killed before it got the commit", func(t *testing.T) {
		g := newMoveRig(t, bin, nil)
		mig := g.srcTools.holdMigrate()
		commit := g.proxy.holdNext("commit", false)
		mv := g.startMove()
		mig.await(t, "POST /migrate")
		g.mustAccept(g.src, "during the pause")
		mig.release <- pass
		commit.await(t, "the commit request")
		g.dst.kill()
		commit.release <- fail
		r := g.awaitMove(mv)
		if r.err != nil || (r.status != http.StatusGatewayTimeout && r.status != http.StatusBadGateway) {
			t.Fatalf("move request: %d %s %v; want 504 (outcome unknown) or 502 (failed)", r.status, r.body, r.err)
		}
		t.Logf("the source answered the move request %d: %s", r.status, strings.TrimSpace(r.body))
		if r.status == http.StatusGatewayTimeout {
			g.mustRefuse(g.src, "while the destination is down", http.StatusServiceUnavailable)
		}
		g.dst.start(t)
		g.checkStayed()
	})
	// The destination dies right after it committed: the source asks until
	// it is back, hears "arrived" and finishes the move.
	t.Run("destination killed after it committed", func(t *testing.T) {
		destinationKilledAfterCommit(t, bin, nil)
	})
	t.Run("PostgreSQL destination killed after it committed", func(t *testing.T) {
		destinationKilledAfterCommit(t, bin, []string{"RAP_STORE=" + pgtest.URL(t)})
	})
}

// TestMoveWithALateCommitLeavesTheSessionInOnePlace delivers the commit
// of a move to the destination late: after the source, which could not
// tell whether the destination took the session, asked it ("arriving")
// and decided to call the move off, and before its abort arrives. The
// destination commits and refuses the abort (409: the session arrived);
// the source must then not resume the session, which would run in two
// places.
func TestMoveWithALateCommitLeavesTheSessionInOnePlace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rap and runs 4 rap serve processes")
	}
	bin := buildRap(t, t.TempDir())
	// The source is killed while its commit is on the way; restarted, it
	// asks and calls the move off.
	t.Run("source killed, commit delivered between its status and abort", func(t *testing.T) {
		g := newMoveRig(t, bin, nil)
		mig := g.srcTools.holdMigrate()
		commit := g.proxy.holdNext("commit", false)
		mv := g.startMove()
		mig.await(t, "POST /migrate")
		g.mustAccept(g.src, "during the pause")
		mig.release <- pass
		commit.await(t, "the commit request")
		g.src.kill()
		if r := g.awaitMove(mv); r.err == nil {
			t.Fatalf("the killed source answered the move request: %d %s", r.status, r.body)
		}
		commit.release <- detach
		abort := g.proxy.holdNext("abort", false)
		g.src.start(t)
		lateCommit(t, g, commit, abort)
	})
	// The same without a crash: the source's commit request breaks (a
	// proxy's timeout, say) while the commit still travels to the
	// destination.
	t.Run("no crash, commit delivered between the source's status and abort", func(t *testing.T) {
		g := newMoveRig(t, bin, nil)
		commit := g.proxy.holdNext("commit", false)
		abort := g.proxy.holdNext("abort", false)
		mv := g.startMove()
		commit.await(t, "the commit request")
		commit.release <- detach
		lateCommit(t, g, commit, abort)
		r := g.awaitMove(mv)
		t.Logf("the source answered the move request %d: %s", r.status, strings.TrimSpace(r.body))
	})
}

// TestMoveKeepsMessagesTakenWhileTheSessionIsSent posts messages without
// a pause to the source while a move goes from paused (messages are
// taken and kept) to sent (messages are refused with 503): every message
// the source took must reach the destination's history, once.
func TestMoveKeepsMessagesTakenWhileTheSessionIsSent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rap and runs 2 rap serve processes")
	}
	g := newMoveRig(t, buildRap(t, t.TempDir()), nil)
	mig := g.srcTools.holdMigrate()
	mv := g.startMove()
	mig.await(t, "POST /migrate")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				text := fmt.Sprintf("burst %d-%d", i, k)
				code, err := g.postMessage(g.src, text)
				g.mu.Lock()
				switch {
				case err == nil && code/100 == 2:
					g.accepted = append(g.accepted, text)
				case err == nil && (code == http.StatusServiceUnavailable || code == http.StatusPermanentRedirect):
					g.refused = append(g.refused, text)
				default:
					t.Errorf("message %q to the source: %d %v; want it taken, 503 or 308", text, code, err)
				}
				g.mu.Unlock()
			}
		})
	}
	pollUntil(t, holdWithin, "messages taken while the session is paused", func() (bool, string) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.accepted) >= 20, fmt.Sprintf("%d taken", len(g.accepted))
	})
	mig.release <- pass
	r := g.awaitMove(mv)
	close(stop)
	wg.Wait()
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("move request: %d %s %v; want 200", r.status, r.body, r.err)
	}
	t.Logf("%d messages taken by the source during the move, %d refused", len(g.accepted), len(g.refused))
	g.checkMoved()
}

// lateCommit lets a detached commit reach the destination once the
// source's abort of the same move is held, then lets the abort go on, and
// checks that the session ends in one place.
func lateCommit(t *testing.T, g *moveRig, commit, abort *hold) {
	t.Helper()
	abort.await(t, "the source's abort after it heard \"arriving\"")
	commit.release <- pass
	a := commit.awaitForwarded(t, "the late commit")
	t.Logf("the destination answered the late commit %d: %s", a.status, bytes.TrimSpace(a.body))
	abort.release <- pass
	b := abort.awaitForwarded(t, "the abort")
	t.Logf("the destination answered the abort %d: %s", b.status, bytes.TrimSpace(b.body))
	g.checkOneOwner()
}

// destinationKilledAfterCommit kills the destination (with its extra
// environment dstEnv) right after it committed the session, answers the
// source with a broken connection, and restarts the destination: the
// session must end there, and only there.
func destinationKilledAfterCommit(t *testing.T, bin string, dstEnv []string) {
	g := newMoveRig(t, bin, dstEnv)
	mig := g.srcTools.holdMigrate()
	commit := g.proxy.holdNext("commit", true)
	mv := g.startMove()
	mig.await(t, "POST /migrate")
	g.mustAccept(g.src, "during the pause")
	mig.release <- pass
	if a := commit.await(t, "the commit's answer"); a.err != nil || a.status != http.StatusOK {
		t.Fatalf("the destination answered the commit: %d %s %v; want 200", a.status, a.body, a.err)
	}
	g.dst.kill()
	commit.release <- fail
	r := g.awaitMove(mv)
	if r.err != nil || r.status != http.StatusGatewayTimeout {
		t.Fatalf("move request: %d %s %v; want 504 (outcome unknown: the destination is down)", r.status, r.body, r.err)
	}
	g.mustRefuse(g.src, "while the destination is down", http.StatusServiceUnavailable)
	g.dst.start(t)
	g.checkMoved()
}
