package otc

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// syncBuf is a log sink tests can read while the bridge writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type testBridge struct {
	b   *Bridge
	url string
	log *syncBuf
	rt  *raptest.Runtime
}

func startBridge(t *testing.T, o Options) *testBridge {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lb := &syncBuf{}
	o.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if o.AuthPollMin == 0 {
		o.AuthPollMin, o.AuthPollMax = 5*time.Millisecond, 20*time.Millisecond
	}
	// The runtime closes last (cleanups run in reverse), so that results
	// the bridge still sends at shutdown are delivered.
	rt, err := raptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	b, err := New(ctx, &o)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Server().Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(b.Server())
	t.Cleanup(func() {
		hs.Close()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		b.Server().Shutdown(sctx)
	})
	return &testBridge{b: b, url: hs.URL, log: lb, rt: rt}
}

func (tb *testBridge) result(t *testing.T, op string, args any, opts ...raptest.InvokeOption) (*rap.ToolResult, *raptest.Call) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call, err := tb.rt.Invoke(ctx, tb.url, op, args, opts...)
	if err != nil {
		t.Fatalf("invoke %s: %v", op, err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	return res, call
}

func arcadeBridge(t *testing.T, o Options) (*arcadeWorker, *testBridge) {
	w := newArcadeWorker(t, "worker-secret-1")
	if o.Client == nil {
		o.Client = &Client{BaseURL: w.srv.URL, Secret: []byte("worker-secret-1")}
	}
	return w, startBridge(t, o)
}

// An Arcade worker's tools are listed (the bad one
// left out), called asynchronously with run_id, execution_id, the tool
// reference and version, and user_id; values come back as text.
func TestArcadeValues(t *testing.T) {
	w, tb := arcadeBridge(t, Options{})
	if tb.b.Dialect() != DialectArcade {
		t.Fatalf("dialect %q", tb.b.Dialect())
	}
	if len(tb.b.Problems()) != 1 || tb.b.Problems()[0].Tool != "Bad.Date" {
		t.Fatalf("problems %+v", tb.b.Problems())
	}
	if !strings.Contains(tb.log.String(), "Bad.Date") {
		t.Fatal("the left-out tool was not reported in the log")
	}
	res, _ := tb.result(t, "Math_Add", map[string]int{"a": 2, "b": 40}, raptest.InThread("child"), raptest.WithAncestors("root-thread", "mid"), raptest.WithUserID("u-7"))
	if res.ModelText() != "42" {
		t.Fatalf("Math_Add = %q", res.ModelText())
	}
	req := w.lastRequest(t)
	if req.RunID != "root-thread" || req.ExecutionID != res.ID || req.Tool.Toolkit != "Math" || req.Tool.Name != "Add" || req.Tool.Version != "1.0.0" || req.Context.UserID != "u-7" {
		t.Fatalf("worker got %+v", req)
	}
	res, _ = tb.result(t, "Text_Echo", map[string]string{"text": "plain \"words\""})
	if res.ModelText() != `plain "words"` {
		t.Fatalf("string value = %q", res.ModelText())
	}
	if w.lastRequest(t).RunID != tb.rt.ThreadID() {
		t.Fatal("run_id of a root thread is not its group_id")
	}
	res, _ = tb.result(t, "Text_Profile", nil)
	if res.ModelText() != `{"langs":["go"],"name":"Ada"}` {
		t.Fatalf("object value = %q", res.ModelText())
	}
	// Every request carried a fresh JWT the worker accepted.
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.tokens) < 4 {
		t.Fatalf("worker saw %d tokens", len(w.tokens))
	}
}

// Errors with and without can_retry; developer_message only
// in the log.
func TestArcadeErrors(t *testing.T) {
	_, tb := arcadeBridge(t, Options{})
	res, _ := tb.result(t, "Text_Flaky", nil)
	want := "Error: The service is busy.\nAsk for fewer items.\nThis call can be retried after 1.5s."
	if res.ModelText() != want {
		t.Fatalf("retryable error = %q, want %q", res.ModelText(), want)
	}
	res, _ = tb.result(t, "Text_Broken", nil)
	want = "Error: The file does not exist.\nRetrying the same call will not help."
	if res.ModelText() != want {
		t.Fatalf("fatal error = %q, want %q", res.ModelText(), want)
	}
	if !strings.Contains(tb.log.String(), "dev: shard 3 timed out") || !strings.Contains(tb.log.String(), "dev: ENOENT") {
		t.Fatal("developer messages are not in the log")
	}
}

// Artifacts: an image as image content, anything else as a
// description with URL, MIME type and size.
func TestArcadeArtifacts(t *testing.T) {
	w, tb := arcadeBridge(t, Options{})
	res, _ := tb.result(t, "Pics_Chart", nil)
	if len(res.Content) != 2 || res.Content[1].Type != "image" || res.Content[1].MediaType != "image/png" {
		t.Fatalf("image artifact content %+v", res.Content)
	}
	if d, _ := base64.StdEncoding.DecodeString(res.Content[1].Data); !bytes.Equal(d, onePixelPNG) {
		t.Fatal("image data differs")
	}
	if !strings.Contains(res.Content[0].Text, "A bar chart") {
		t.Fatalf("image description %q", res.Content[0].Text)
	}
	res, _ = tb.result(t, "Pics_Report", nil)
	want := "Artifact: Quarterly report\nURL: " + w.srv.URL + "/files/report.pdf\nMIME type: application/pdf\nSize: 48213 bytes"
	if res.ModelText() != want {
		t.Fatalf("pdf artifact = %q, want %q", res.ModelText(), want)
	}
}

// Authorization required: the oauth link reaches the
// runtime, the bridge waits (Arcade workers have no status route, so it
// repeats the call with backoff) and delivers the final result.
func TestArcadeAuthorization(t *testing.T) {
	w, tb := arcadeBridge(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call, err := tb.rt.Invoke(ctx, tb.url, "Github_Me", nil, raptest.WithUserID("ada"))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := call.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oa, ok := msg.(*rap.OAuth)
	if !ok || oa.AuthURL != w.srv.URL+"/authorize/gh-1" {
		t.Fatalf("first callback %#v, want the oauth link", msg)
	}
	w.authorized.Store(true) // the user completes the flow
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelText() != "octocat (ada)" {
		t.Fatalf("result %q", res.ModelText())
	}
	if strings.Contains(tb.log.String(), "/authorize/gh-1") {
		t.Fatal("the authorization URL was logged")
	}
}

// A hung worker ends in an Error: result after the
// configured timeout; /cancel_tool_call aborts the HTTP call.
func TestArcadeHangAndCancel(t *testing.T) {
	w, tb := arcadeBridge(t, Options{CallTimeout: 300 * time.Millisecond})
	res, _ := tb.result(t, "Slow_Hang", nil)
	if !strings.HasPrefix(res.ModelText(), "Error: ") || !strings.Contains(res.ModelText(), "did not answer within 300ms") {
		t.Fatalf("hung call result %q", res.ModelText())
	}
	<-w.started
	<-w.hangDone

	w2, tb2 := arcadeBridge(t, Options{CallTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call, err := tb2.rt.Invoke(ctx, tb2.url, "Slow_Hang", nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w2.started:
	case <-ctx.Done():
		t.Fatal("the worker never got the call")
	}
	if err := call.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w2.hangDone: // the worker saw its request aborted
	case <-ctx.Done():
		t.Fatal("/cancel_tool_call did not abort the HTTP call to the worker")
	}
}

// A value larger than a RAP callback can carry is cut, with
// a note, so that the result is still delivered.
func TestHugeValueTruncated(t *testing.T) {
	_, tb := arcadeBridge(t, Options{})
	res, _ := tb.result(t, "Text_Huge", nil)
	txt := res.ModelText()
	if len(txt) > maxResultText+200 || !strings.Contains(txt, "truncated by the OTC bridge: the tool's value was 3145728 bytes") || !utf8.ValidString(txt) {
		t.Fatalf("result of %d bytes ends %q", len(txt), txt[max(0, len(txt)-120):])
	}
	if got := FitText("héllo", 2); got != "h\n[truncated by the OTC bridge: the tool's value was 6 bytes; only the first 1 are shown]" {
		t.Fatalf("FitText cut inside a character: %q", got)
	}
}

// A token the bridge holds for the tool's provider and user
// is sent in the context, so no authorization is asked for.
func TestArcadeTokenFromResolver(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	w, tb := arcadeBridge(t, Options{Tokens: func(_ context.Context, provider, user string) (string, error) {
		mu.Lock()
		asked = append(asked, provider+"/"+user)
		mu.Unlock()
		return "gh-token-" + user, nil
	}})
	res, call := tb.result(t, "Github_Me", nil, raptest.WithUserID("ada"))
	if res.ModelText() != "octocat via token (ada)" || len(call.Messages()) != 1 {
		t.Fatalf("result %q after %d messages", res.ModelText(), len(call.Messages()))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != "github/ada" {
		t.Fatalf("token lookups %v", asked)
	}
	if strings.Contains(tb.log.String(), "gh-token-") {
		t.Fatal("a token was logged")
	}
	_ = w
}
