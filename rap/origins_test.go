package rap_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
)

// ServerOptions.CallbackHeader (the runtime's
// credentials) goes only to CallbackOrigins. A caller that names a
// callback_url on another origin gets its result without the header, and
// a redirect from the runtime's origin to another one drops it too.
func TestCallbackHeaderOnlyToConfiguredOrigins(t *testing.T) {
	const secret = "Bearer runtime-credential"
	attacker := newRecordingRuntime(t, ok200)
	runtime := newRecordingRuntime(t, func(r *http.Request, _ []byte) int { return http.StatusOK })
	redirector := httptest.NewServer(http.RedirectHandler(attacker.srv.URL+"/via-redirect", http.StatusTemporaryRedirect))
	t.Cleanup(redirector.Close)

	_, hs := newSDKServer(t, &rap.ServerOptions{
		CallbackHeader:  http.Header{"Authorization": {secret}, "X-Runtime-Key": {"k"}},
		CallbackOrigins: []string{runtime.srv.URL, redirector.URL},
	}, addEcho)
	sdkPost(t, hs.URL, sdkInvocation("echo", "to-runtime", "t", runtime.srv.URL+"/cb", map[string]any{"text": "a"}))
	sdkPost(t, hs.URL, sdkInvocation("echo", "to-attacker", "t", attacker.srv.URL+"/cb", map[string]any{"text": "b"}))
	sdkPost(t, hs.URL, sdkInvocation("echo", "redirected", "t", redirector.URL+"/cb", map[string]any{"text": "c"}))

	sdkPoll(t, "all three results", func() bool { return len(runtime.accepted(t)) == 1 && len(attacker.accepted(t)) == 2 })
	if got := runtime.all()[0].header; got.Get("Authorization") != secret || got.Get("X-Runtime-Key") != "k" {
		t.Errorf("the configured runtime origin got headers %v; want the configured credentials", got)
	}
	for _, r := range attacker.all() {
		if r.header.Get("Authorization") != "" || r.header.Get("X-Runtime-Key") != "" {
			t.Errorf("a callback to an unlisted origin carried the credentials: %v (body %s)", r.header, r.body)
		}
	}
}

// Credentials without a listed origin are a
// configuration error that names the option, not a silent leak.
func TestCallbackHeaderWithoutOriginsFailsStart(t *testing.T) {
	s := rap.NewServer("t", &rap.ServerOptions{CallbackHeader: http.Header{"Authorization": {"Bearer x"}}, Logger: sdkQuiet()})
	err := s.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "CallbackOrigins") {
		t.Fatalf("Start = %v; want an error naming CallbackOrigins", err)
	}
	s = rap.NewServer("t", &rap.ServerOptions{CallbackOrigins: []string{"https://runtime.example/path"}, Logger: sdkQuiet()})
	if err := s.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "scheme://host:port") {
		t.Fatalf("Start with a malformed origin = %v; want an error showing the form", err)
	}
	snd := rap.NewSender(rap.SenderOptions{Header: http.Header{"Authorization": {"Bearer x"}}})
	if err := snd.Send(context.Background(), "http://127.0.0.1:1/cb", &rap.ToolResult{GroupID: "g", ID: "i"}); err == nil || !strings.Contains(err.Error(), "HeaderOrigins") {
		t.Fatalf("Send = %v; want an error naming HeaderOrigins", err)
	}
}

// Origins compare without regard to the host's case.
func TestHeaderOriginsIgnoreHostCase(t *testing.T) {
	rt := newRecordingRuntime(t, ok200)
	s := rap.NewSender(rap.SenderOptions{Header: http.Header{"X-K": {"v"}}, HeaderOrigins: []string{strings.Replace(rt.srv.URL, "127.0.0.1", "LOCALHOST", 1)}, Logger: sdkQuiet()})
	u := strings.Replace(rt.srv.URL, "127.0.0.1", "localhost", 1)
	if err := s.Send(context.Background(), u+"/cb", &rap.ToolResult{GroupID: "g", ID: "i"}); err != nil {
		t.Fatal(err)
	}
	if got := rt.all()[0].header.Get("X-K"); got != "v" {
		t.Errorf("header %q; a host differing only in case must match", got)
	}
}
