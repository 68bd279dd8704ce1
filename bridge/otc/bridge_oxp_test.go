package otc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

func oxpBridge(t *testing.T, o Options) (*oxpWorker, *testBridge) {
	w := newOXPWorker(t)
	o.Client = &Client{BaseURL: w.srv.URL}
	return w, startBridge(t, o)
}

// OXP 1.0: detection by /health, input_schema
// as given, call_id = the RAP call id, value and error responses; every
// request and answer is checked against openapi-1.0.json by the worker.
func TestOXPValuesAndErrors(t *testing.T) {
	w, tb := oxpBridge(t, Options{})
	if tb.b.Dialect() != DialectOXP {
		t.Fatalf("dialect %q", tb.b.Dialect())
	}
	if len(tb.b.Problems()) != 1 || tb.b.Problems()[0].Tool != "Bad.Schema" {
		t.Fatalf("problems %+v", tb.b.Problems())
	}
	res, _ := tb.result(t, "Calc_Add", map[string]float64{"a": 1.5, "b": 2}, raptest.WithAncestors("root"), raptest.InThread("t2"))
	if res.ModelText() != "3.5" {
		t.Fatalf("Calc_Add = %q", res.ModelText())
	}
	c := w.lastCall(t)
	if c.Request.CallID != res.ID || c.Request.ToolID != "Calc.Add@1.0.0" || c.Request.TraceID != "root" {
		t.Fatalf("worker got %+v", c.Request)
	}
	res, _ = tb.result(t, "Calc_Greet", map[string]string{"who": "Bob"})
	if res.ModelText() != "hello Bob" {
		t.Fatalf("Calc_Greet = %q", res.ModelText())
	}
	if w.lastCall(t).Request.ToolID != "Calc.Greet@1.0.0" {
		t.Fatal("the tool version was not sent")
	}
	res, _ = tb.result(t, "Calc_Fail", nil)
	if want := "Error: Rate limited.\nWait before calling again.\nThis call can be retried after 250ms."; res.ModelText() != want {
		t.Fatalf("error = %q, want %q", res.ModelText(), want)
	}
	if strings.Contains(res.ModelText(), "dev:") || !strings.Contains(tb.log.String(), "dev: 429") {
		t.Fatal("developer_message must be in the log only")
	}
	// The tool's own schema is enforced before the worker is called.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tb.rt.Invoke(ctx, tb.url, "Calc_Add", map[string]string{"a": "x"}); err == nil {
		t.Fatal("arguments against the OXP input_schema were accepted")
	}
}

// OXP: authorization required then completed: the oauth
// link reaches the runtime, the bridge polls check_url with backoff, keeps
// the token it returns and retries the call with it.
func TestOXPAuthorizationCompleted(t *testing.T) {
	w, tb := oxpBridge(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call, err := tb.rt.Invoke(ctx, tb.url, "Mail_Inbox", nil, raptest.WithUserID("ada"))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := call.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if oa, ok := msg.(*rap.OAuth); !ok || oa.AuthURL != w.srv.URL+"/consent/inbox" {
		t.Fatalf("first callback %#v, want the oauth link", msg)
	}
	for w.checks.Load() < 2 { // the bridge is polling check_url
		select {
		case <-ctx.Done():
			t.Fatal("the bridge never polled check_url")
		case <-time.After(5 * time.Millisecond):
		}
	}
	w.consented.Store(true)
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelText() != `{"unread":3,"user":"ada"}` {
		t.Fatalf("result %q", res.ModelText())
	}
	// A second call by the same user reuses the token: no new challenge.
	res, call2 := tb.result(t, "Mail_Inbox", nil, raptest.WithUserID("ada"))
	if res.ModelText() != `{"unread":3,"user":"ada"}` || len(call2.Messages()) != 1 {
		t.Fatalf("second call: %q after %d messages", res.ModelText(), len(call2.Messages()))
	}
	if strings.Contains(tb.log.String(), "tok-inbox") || strings.Contains(tb.log.String(), "/consent/") {
		t.Fatal("a token or an authorization URL was logged")
	}
}

// An authorization that never completes gives a clear
// Error: result after the time limit.
func TestOXPAuthorizationTimeout(t *testing.T) {
	_, tb := oxpBridge(t, Options{AuthTimeout: 150 * time.Millisecond})
	res, call := tb.result(t, "Mail_Never", nil)
	if _, ok := call.Messages()[0].(*rap.OAuth); !ok {
		t.Fatal("no oauth message before the result")
	}
	if !strings.HasPrefix(res.ModelText(), "Error: ") || !strings.Contains(res.ModelText(), "authorization was not completed within 150ms") {
		t.Fatalf("result %q", res.ModelText())
	}
}

// A secret a tool's requirements list reaches the worker
// (both dialects) and appears in no log, result or callback.
func TestSecretsReachWorkerOnly(t *testing.T) {
	dir := t.TempDir()
	ow := newOXPWorker(t)
	if err := os.WriteFile(filepath.Join(dir, "OXP_KEY"), []byte(ow.key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tbo := startBridge(t, Options{Client: &Client{BaseURL: ow.srv.URL}, Secrets: EnvFileSecrets{Dir: dir, Getenv: func(string) string { return "" }}})
	res, callO := tbo.result(t, "Keys_Use", nil)
	if res.ModelText() != "key accepted" {
		t.Fatalf("OXP secret: %q", res.ModelText())
	}

	aw := newArcadeWorker(t, "s3")
	tba := startBridge(t, Options{Client: &Client{BaseURL: aw.srv.URL, Secret: []byte("s3")},
		Secrets: EnvFileSecrets{Getenv: func(k string) string {
			if k == "VAULT_KEY" {
				return aw.vaultKey
			}
			return ""
		}}})
	res2, callA := tba.result(t, "Vault_Use", nil)
	if res2.ModelText() != "the vault opened" {
		t.Fatalf("Arcade secret: %q", res2.ModelText())
	}
	var everything strings.Builder
	everything.WriteString(tbo.log.String() + tba.log.String())
	for _, c := range [](*raptest.Call){callO, callA} {
		for _, m := range c.Messages() {
			b, _ := m.(interface{ MarshalJSON() ([]byte, error) }).MarshalJSON()
			everything.Write(b)
		}
	}
	for _, secret := range []string{ow.key, aw.vaultKey} {
		if strings.Contains(everything.String(), secret) {
			t.Fatalf("the secret %q leaked into logs or callbacks", secret)
		}
	}
	// A world-readable secret file is refused.
	os.WriteFile(filepath.Join(dir, "OPEN"), []byte("x"), 0o644)
	os.Chmod(filepath.Join(dir, "OPEN"), 0o644)
	if _, err := (EnvFileSecrets{Dir: dir, Getenv: func(string) string { return "" }}).Secret(context.Background(), "OPEN"); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable secret file: %v", err)
	}
	// A missing secret ends the call with an Error: result, and the worker
	// is not called.
	tbm := startBridge(t, Options{Client: &Client{BaseURL: ow.srv.URL}, Secrets: EnvFileSecrets{Getenv: func(string) string { return "" }}})
	res3, _ := tbm.result(t, "Keys_Use", nil)
	if !strings.HasPrefix(res3.ModelText(), "Error: ") || !strings.Contains(res3.ModelText(), "OXP_KEY") {
		t.Fatalf("missing secret: %q", res3.ModelText())
	}
}

// The JWT follows validate_engine_token; a wrong secret is
// a clear error at load, and a secret that goes bad later is a clear
// Error: result on calls.
func TestWorkerSecret(t *testing.T) {
	w := newArcadeWorker(t, "right")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := New(ctx, &Options{Client: &Client{BaseURL: w.srv.URL, Secret: []byte("wrong")}})
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "ARCADE_WORKER_SECRET") {
		t.Fatalf("wrong secret at load: %v", err)
	}
	_, err = New(ctx, &Options{Client: &Client{BaseURL: w.srv.URL}})
	if err == nil {
		t.Fatal("no secret accepted by a worker that requires one")
	}
	cl := &Client{BaseURL: w.srv.URL, Secret: []byte("right")}
	tb := startBridge(t, Options{Client: cl})
	cl.Secret = []byte("rotated")
	res, _ := tb.result(t, "Text_Echo", map[string]string{"text": "x"})
	if !strings.HasPrefix(res.ModelText(), "Error: ") || !strings.Contains(res.ModelText(), "refused the bridge's credentials") {
		t.Fatalf("401 on a call: %q", res.ModelText())
	}
	if tok, _ := (&Client{Secret: []byte("k")}).Token(time.Now()); strings.Contains(tok, "k\"") || strings.Count(tok, ".") != 2 {
		t.Fatalf("token %q", tok)
	}
}

// A worker that is down at start is a clear error; one
// that goes down mid-call ends the accepted call in an Error: result.
func TestWorkerDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	_, err := New(ctx, &Options{Client: &Client{BaseURL: url}})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the worker at "+url) {
		t.Fatalf("down at start: %v", err)
	}
	nothing := httptest.NewServer(http.NotFoundHandler())
	defer nothing.Close()
	if _, err := New(ctx, &Options{Client: &Client{BaseURL: nothing.URL}}); err == nil || !strings.Contains(err.Error(), "speaks no OTC dialect") {
		t.Fatalf("not a worker: %v", err)
	}

	w, tb := arcadeBridge(t, Options{})
	call, err := tb.rt.Invoke(ctx, tb.url, "Slow_Hang", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-w.started
	w.srv.CloseClientConnections() // the worker dies mid-call
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.ModelText(), "Error: ") || !strings.Contains(res.ModelText(), "could not be run") {
		t.Fatalf("mid-call failure: %q", res.ModelText())
	}
}

// The OXP validation the test worker runs does reject answers that break
// openapi-1.0.json, so the tests above would notice.
func TestOXPSchemaValidationBites(t *testing.T) {
	ss, err := oxpSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for which, bad := range map[string]string{
		"call 200":     `{"result":{"success":true,"value":1}}`,
		"call request": `{"request":{"tool_id":"Calc.Add","run_id":"x"}}`,
		"call 400":     `{"missing_requirements":{}}`,
	} {
		v, _ := jsonschemaUnmarshal(bad)
		if ss[which].Validate(v) == nil {
			t.Errorf("%s accepted %s", which, bad)
		}
	}
	for which, good := range map[string]string{
		"call 200": `{"result":{"call_id":"c","success":false,"error":{"message":"m","can_retry":true}}}`,
	} {
		v, _ := jsonschemaUnmarshal(good)
		if err := ss[which].Validate(v); err != nil {
			t.Errorf("%s refused %s: %v", which, good, err)
		}
	}
}
