package rap_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// sdkChoice waits for the user_choice message of call id.
func sdkChoice(t *testing.T, sink *sdkSink, id string) *rap.UserChoice {
	t.Helper()
	var uc *rap.UserChoice
	sink.waitFor(id, "a user_choice", func(msgs []rap.Callback) bool {
		for _, m := range msgs {
			if c, ok := m.(*rap.UserChoice); ok {
				uc = c
				return true
			}
		}
		return false
	})
	return uc
}

// askTool asks a question and reports the answer as its result.
func askTool(timeout time.Duration) func(*rap.Server) {
	return func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "deploy", Description: "Deploys after asking."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				i, err := c.AskUser(ctx, "Deploy to production?", []string{"Yes", "Yes for session", "No"}, 2, timeout)
				if err != nil {
					return nil, err
				}
				return rap.Text(fmt.Sprintf("chose %d", i)), nil
			})
	}
}

// RAP UC-1, UC-2: AskUser sends a user_choice with a response_url on this
// server; the runtime's POST {id, selected} there is validated (known id,
// index in range, the URL's key) and the handler gets the index.
func TestAskUser(t *testing.T) {
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, nil, askTool(0))
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("deploy", "ask_1", "thread_u", sink.URL(), nil)); status != 200 {
		t.Fatal("refused")
	}
	uc := sdkChoice(t, sink, "ask_1")
	if uc.GroupID != "thread_u" || uc.Prompt != "Deploy to production?" || len(uc.Choices) != 3 || uc.Default != 2 {
		t.Errorf("user_choice %+v", uc)
	}
	u, err := url.Parse(uc.ResponseURL)
	if err != nil || u.Scheme+"://"+u.Host != hs.URL || u.Path != "/user_choice_response" || u.Query().Get("key") == "" {
		t.Fatalf("response_url %q, want %s/user_choice_response with a key", uc.ResponseURL, hs.URL)
	}
	bare := hs.URL + "/user_choice_response"
	for _, tc := range []struct {
		name, url, body string
		want            int
		say             string
	}{
		{"malformed", uc.ResponseURL, `{"id":`, 400, "invalid user choice response"},
		{"missing selected", uc.ResponseURL, `{"id":"ask_1"}`, 400, "selected"},
		{"negative", uc.ResponseURL, `{"id":"ask_1","selected":-1}`, 400, "selected"},
		{"unknown id", uc.ResponseURL, `{"id":"ask_9","selected":0}`, 400, "no user choice is pending"},
		{"out of range", uc.ResponseURL, `{"id":"ask_1","selected":3}`, 400, "out of range"},
		{"no key", bare, `{"id":"ask_1","selected":0}`, 401, "response_url"},
		{"wrong key", bare + "?key=00", `{"id":"ask_1","selected":0}`, 401, "response_url"},
	} {
		if status, body, _ := sdkPost(t, tc.url, []byte(tc.body)); status != tc.want || !strings.Contains(body, tc.say) {
			t.Errorf("%s: answered %d %q, want %d mentioning %q", tc.name, status, body, tc.want, tc.say)
		}
	}
	if got := sink.forID("ask_1"); len(got) != 1 {
		t.Fatalf("a rejected response ended the call: %s", sdkDescribe(got))
	}
	if status, body, _ := sdkPost(t, uc.ResponseURL, []byte(`{"id":"ask_1","selected":1}`)); status != 200 {
		t.Fatalf("valid response answered %d %q", status, body)
	}
	if res := sink.result("ask_1"); res.Text != "chose 1" {
		t.Errorf("result %q, want %q", res.Text, "chose 1")
	}
	// Answered once: a replay finds nothing (RAP UC-2).
	if status, _, _ := sdkPost(t, uc.ResponseURL, []byte(`{"id":"ask_1","selected":0}`)); status != 400 {
		t.Errorf("replayed response answered %d, want 400", status)
	}
}

// With a bearer token configured, the runtime may answer either at the
// response_url as sent (the reference runtime does, without credentials)
// or with the bearer token.
func TestAskUserWithBearerToken(t *testing.T) {
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, &rap.ServerOptions{BearerToken: "tok"}, askTool(0))
	auth := []string{"Authorization", "Bearer tok"}
	for i, answer := range []struct {
		viaKey bool
		header []string
	}{{true, nil}, {false, auth}} {
		id := fmt.Sprintf("ask_b%d", i)
		if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("deploy", id, "t", sink.URL(), nil), auth...); status != 200 {
			t.Fatal("refused")
		}
		uc := sdkChoice(t, sink, id)
		target := uc.ResponseURL
		if !answer.viaKey {
			target = hs.URL + "/user_choice_response"
		}
		if status, body, _ := sdkPost(t, target, []byte(`{"id":"`+id+`","selected":0}`), answer.header...); status != 200 {
			t.Fatalf("answer %d: %d %q", i, status, body)
		}
		if res := sink.result(id); res.Text != "chose 0" {
			t.Errorf("result %q", res.Text)
		}
	}
	// Whether a choice is pending is not told to a caller without the
	// token or a valid key; an authenticated one learns it.
	bare := hs.URL + "/user_choice_response"
	if status, body, _ := sdkPost(t, bare, []byte(`{"id":"ask_b0","selected":0}`)); status != 401 || strings.Contains(body, "pending") {
		t.Errorf("unauthenticated response for an answered choice: %d %q, want 401 that tells nothing about it", status, body)
	}
	if status, body, _ := sdkPost(t, bare, []byte(`{"id":"ask_b0","selected":0}`), auth...); status != 400 || !strings.Contains(body, "no user choice is pending") {
		t.Errorf("authenticated response for an answered choice: %d %q, want 400 saying none is pending", status, body)
	}
}

// A dismissed or unanswered prompt yields the default (RAP UC-2): AskUser
// returns def after its timeout, and def with an error when the call is
// cancelled.
func TestAskUserTimeoutAndCancel(t *testing.T) {
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, nil, askTool(100*time.Millisecond))
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("deploy", "ask_t", "t", sink.URL(), nil)); status != 200 {
		t.Fatal("refused")
	}
	if res := sink.result("ask_t"); res.Text != "chose 2" {
		t.Errorf("after the timeout the result is %q, want the default, %q", res.Text, "chose 2")
	}

	got := make(chan [2]any, 1)
	_, hs2 := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "ask", Description: "Asks."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				i, err := c.AskUser(ctx, "Sure?", []string{"yes", "no"}, 1, 0)
				got <- [2]any{i, err}
				return rap.Text("x"), nil
			})
	})
	if status, _, _ := sdkPost(t, hs2.URL, sdkInvocation("ask", "ask_c", "thread_c", sink.URL(), nil)); status != 200 {
		t.Fatal("refused")
	}
	sdkChoice(t, sink, "ask_c")
	sdkPost(t, hs2.URL+"/cancel_tool_call", []byte(`{"thread_id":"thread_c","tool_call_id":"ask_c"}`))
	select {
	case r := <-got:
		if r[0] != 1 || !errors.Is(r[1].(error), rap.ErrCallCancelled) {
			t.Errorf("AskUser after cancel returned (%v, %v), want (1, ErrCallCancelled)", r[0], r[1])
		}
	case <-time.After(sdkWait):
		t.Fatal("AskUser did not return after the call was cancelled")
	}
}

// AskUser refuses invalid questions before sending anything (RAP UC-1).
func TestAskUserRejectsInvalidQuestions(t *testing.T) {
	sink := newSDKSink(t)
	errs := make(chan error, 4)
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "ask", Description: "Asks badly."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				_, e1 := c.AskUser(ctx, "?", nil, 0, time.Second)
				_, e2 := c.AskUser(ctx, "?", []string{"a"}, 1, time.Second)
				_, e3 := c.AskUser(ctx, "?", make([]string, rap.MaxChoices+1), 0, time.Second)
				_, e4 := c.AskUser(ctx, strings.Repeat("x", rap.MaxPromptBytes+1), []string{"a"}, 0, time.Second)
				errs <- e1
				errs <- e2
				errs <- e3
				errs <- e4
				return rap.Text("done"), nil
			})
	})
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("ask", "ask_i", "t", sink.URL(), nil)); status != 200 {
		t.Fatal("refused")
	}
	sink.result("ask_i")
	for i, want := range []string{"choices is empty", "out of range", "over the limit", "prompt"} {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid question %d: error %v, want one mentioning %q", i, err, want)
		}
	}
	if n := len(sink.forID("ask_i")); n != 1 {
		t.Errorf("%d messages, want only the result", n)
	}
}

// RAP OA-1: RequestOAuth sends an oauth message echoing the ids; the call
// stays open and ends with its result. Non-https URLs are refused.
func TestRequestOAuth(t *testing.T) {
	sink := newSDKSink(t)
	codes := make(chan string, 1)
	badErr := make(chan error, 1)
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "repos", Description: "Lists repos.", Annotations: &rap.Annotations{RequiresAuth: "github"}},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				badErr <- c.RequestOAuth(ctx, "http://github.example.com/authorize")
				if err := c.RequestOAuth(ctx, "https://github.example.com/authorize?state=xyz"); err != nil {
					return nil, err
				}
				select {
				case code := <-codes: // the tool's own OAuth redirect endpoint got it
					return rap.Text("authorized with " + code), nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			})
	})
	body := `{"operation":"repos","arguments":{},"id":"oa_1","call_id":"m_oa","group_id":"thread_o","callback_url":"` + sink.URL() + `"}`
	if status, _, _ := sdkPost(t, hs.URL, []byte(body)); status != 200 {
		t.Fatal("refused")
	}
	msgs := sink.waitFor("oa_1", "an oauth message", func(m []rap.Callback) bool { return len(m) == 1 })
	oa, ok := msgs[0].(*rap.OAuth)
	if !ok || oa.AuthURL != "https://github.example.com/authorize?state=xyz" || oa.GroupID != "thread_o" || oa.CallID != "m_oa" {
		t.Fatalf("first message %s, want the oauth message with ids echoed", sdkDescribe(msgs))
	}
	if err := <-badErr; err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("RequestOAuth with a plain-http URL returned %v, want an error asking for https", err)
	}
	codes <- "code-1"
	if res := sink.result("oa_1"); res.Text != "authorized with code-1" {
		t.Errorf("result %q", res.Text)
	}
}

// RAP VU-1: UpdateView sends a view_update with the thread's group_id and
// the content object as given; non-object content is refused.
func TestUpdateView(t *testing.T) {
	sink := newSDKSink(t)
	bad := make(chan [2]error, 1)
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "edit", Description: "Edits."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				bad <- [2]error{c.UpdateView(ctx, "diff", []int{1}), c.UpdateView(ctx, "", map[string]string{})}
				if err := c.UpdateView(ctx, "diff", map[string]string{"patch": "@@ -1 +1 @@"}); err != nil {
					return nil, err
				}
				return rap.Text("edited"), nil
			})
	})
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("edit", "v1", "thread_v", sink.URL(), nil)); status != 200 {
		t.Fatal("refused")
	}
	if res := sink.result("v1"); res.Text != "edited" {
		t.Fatalf("result %q", res.Text)
	}
	var views []*rap.ViewUpdate
	for _, m := range sink.all() {
		if v, ok := m.(*rap.ViewUpdate); ok {
			views = append(views, v)
		}
	}
	if len(views) != 1 || views[0].GroupID != "thread_v" || views[0].ViewType != "diff" || string(views[0].Content) != `{"patch":"@@ -1 +1 @@"}` {
		t.Errorf("view updates %+v, want the one diff view", views)
	}
	errs := <-bad
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "JSON object") {
		t.Errorf("array content: %v, want an error asking for an object", errs[0])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "viewType") {
		t.Errorf("empty view type: %v", errs[1])
	}
}

// Mounted under a prefix, response_url keeps the prefix; PublicURL
// overrides what the request shows.
func TestAskUserResponseURLBase(t *testing.T) {
	sink := newSDKSink(t)
	s := rap.NewServer("prefixed", &rap.ServerOptions{Logger: sdkQuiet(), Retry: sdkFastRetry})
	askTool(0)(s)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/tools/", http.StripPrefix("/tools", s))
	hs := httptest.NewServer(mux)
	defer hs.Close()
	defer func() { _ = s.Shutdown(context.Background()) }()
	if status, _, _ := sdkPost(t, hs.URL+"/tools/", sdkInvocation("deploy", "ask_p", "t", sink.URL(), nil)); status != 200 {
		t.Fatal("refused")
	}
	uc := sdkChoice(t, sink, "ask_p")
	if !strings.HasPrefix(uc.ResponseURL, hs.URL+"/tools/user_choice_response?key=") {
		t.Errorf("response_url %q does not keep the /tools prefix", uc.ResponseURL)
	}
	if status, body, _ := sdkPost(t, uc.ResponseURL, []byte(`{"id":"ask_p","selected":0}`)); status != 200 {
		t.Fatalf("answer: %d %q", status, body)
	}
	sink.result("ask_p")

	_, hs2 := newSDKServer(t, &rap.ServerOptions{PublicURL: "https://tools.example.com/base/"}, askTool(50*time.Millisecond))
	if status, _, _ := sdkPost(t, hs2.URL, sdkInvocation("deploy", "ask_q", "t", sink.URL(), nil)); status != 200 {
		t.Fatal("refused")
	}
	if uc := sdkChoice(t, sink, "ask_q"); !strings.HasPrefix(uc.ResponseURL, "https://tools.example.com/base/user_choice_response?key=") {
		t.Errorf("response_url %q does not use PublicURL", uc.ResponseURL)
	}
}

// A web page cannot answer a user choice for the user: a cross-site
// request or a body a plain form could send is refused before it is read,
// and the choice stays open for the runtime's own answer.
func TestUserChoiceResponseRefusesWebPages(t *testing.T) {
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, nil, askTool(0))
	if status, _, _ := sdkPost(t, hs.URL, sdkInvocation("deploy", "ask_w", "thread_w", sink.URL(), nil)); status != 200 {
		t.Fatal("refused")
	}
	uc := sdkChoice(t, sink, "ask_w")
	answer := []byte(`{"id":"ask_w","selected":0}`)
	for _, tc := range []struct {
		name   string
		header []string
		want   int
	}{
		{"foreign origin", []string{"Origin", "https://evil.example"}, 403},
		{"cross-site fetch", []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"text/plain", []string{"Content-Type", "text/plain"}, 415},
		{"form", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415},
		{"no content type from a page", []string{"Content-Type", "", "Origin", "http://evil.example"}, 403},
	} {
		if status, body, _ := sdkPost(t, uc.ResponseURL, answer, tc.header...); status != tc.want || !strings.Contains(body, "refused") {
			t.Errorf("%s: answered %d %q, want %d", tc.name, status, body, tc.want)
		}
	}
	if got := sink.forID("ask_w"); len(got) != 1 {
		t.Fatalf("a refused answer ended the call: %s", sdkDescribe(got))
	}
	if status, body, _ := sdkPost(t, uc.ResponseURL, []byte(`{"id":"ask_w","selected":2}`)); status != 200 {
		t.Fatalf("the runtime's answer after the refusals: %d %q", status, body)
	}
	if res := sink.result("ask_w"); res.Text != "chose 2" {
		t.Errorf("result %q, want %q", res.Text, "chose 2")
	}
}
