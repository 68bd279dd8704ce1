package mcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// testAuthServer is a small OAuth 2.1 authorization server: RFC 8414
// metadata, RFC 7591 dynamic registration, the authorization code grant
// with PKCE (S256 checked) and the refresh grant. Its /authorize stands
// in for the user's browser session: it logs in the user named by the
// "login" query parameter the test adds.
type testAuthServer struct {
	srv *httptest.Server

	mu       sync.Mutex
	clients  map[string]string  // client_id → redirect URI
	codes    map[string]codeRec // code → grant
	access   map[string]tokRec  // access token → user
	refresh  map[string]string  // refresh token → user
	resource string             // the resource every request must name

	registrations, refreshes, exchanges atomic.Int32
	expiresIn                           int // seconds
}

type codeRec struct{ user, challenge, redirect, client string }
type tokRec struct {
	user    string
	expires time.Time
}

func newTestAuthServer(t *testing.T) *testAuthServer {
	a := &testAuthServer{clients: map[string]string{}, codes: map[string]codeRec{}, access: map[string]tokRec{}, refresh: map[string]string{}, expiresIn: 3600}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{
			"issuer":                                a.srv.URL,
			"authorization_endpoint":                a.srv.URL + "/authorize",
			"token_endpoint":                        a.srv.URL + "/token",
			"registration_endpoint":                 a.srv.URL + "/register",
			"response_types_supported":              []string{"code"},
			"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none"},
		})
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			RedirectURIs []string `json:"redirect_uris"`
		}
		if json.NewDecoder(r.Body).Decode(&m) != nil || len(m.RedirectURIs) != 1 {
			writeJSON(w, 400, map[string]string{"error": "invalid_client_metadata"})
			return
		}
		id := rand.Text()
		a.mu.Lock()
		a.clients[id] = m.RedirectURIs[0]
		a.mu.Unlock()
		a.registrations.Add(1)
		writeJSON(w, 201, map[string]any{"client_id": id, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		a.mu.Lock()
		redirect, ok := a.clients[q.Get("client_id")]
		a.mu.Unlock()
		if !ok || q.Get("redirect_uri") != redirect || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
			q.Get("response_type") != "code" || q.Get("resource") != a.resource || q.Get("login") == "" {
			http.Error(w, "bad authorization request: "+r.URL.RawQuery, 400)
			return
		}
		code := rand.Text()
		a.mu.Lock()
		a.codes[code] = codeRec{user: q.Get("login"), challenge: q.Get("code_challenge"), redirect: redirect, client: q.Get("client_id")}
		a.mu.Unlock()
		http.Redirect(w, r, redirect+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		a.mu.Lock()
		defer a.mu.Unlock()
		var user string
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			c, ok := a.codes[r.PostForm.Get("code")]
			delete(a.codes, r.PostForm.Get("code"))
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || r.PostForm.Get("redirect_uri") != c.redirect ||
				r.PostForm.Get("client_id") != c.client || r.PostForm.Get("resource") != a.resource {
				writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
				return
			}
			user = c.user
			a.exchanges.Add(1)
		case "refresh_token":
			u, ok := a.refresh[r.PostForm.Get("refresh_token")]
			if !ok {
				writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
				return
			}
			user = u
			a.refreshes.Add(1)
		default:
			writeJSON(w, 400, map[string]string{"error": "unsupported_grant_type"})
			return
		}
		at, rt := "at-"+rand.Text(), "rt-"+rand.Text()
		a.access[at] = tokRec{user: user, expires: time.Now().Add(time.Duration(a.expiresIn) * time.Second)}
		a.refresh[rt] = user
		writeJSON(w, 200, map[string]any{"access_token": at, "token_type": "Bearer", "refresh_token": rt, "expires_in": a.expiresIn})
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// verify is the MCP server's token verifier.
func (a *testAuthServer) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	rec, ok := a.access[token]
	if !ok || time.Now().After(rec.expires) {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: rec.user, Expiration: rec.expires}, nil
}

// tokens returns every access and refresh token the server issued.
func (a *testAuthServer) tokens() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for k := range a.access {
		out = append(out, k)
	}
	for k := range a.refresh {
		out = append(out, k)
	}
	return out
}

// protectedMCPServer serves an MCP server whose one tool says who called
// it, behind the SDK's bearer-token middleware, with its protected
// resource metadata (RFC 9728) naming a as the authorization server.
func protectedMCPServer(t *testing.T, a *testAuthServer) string {
	s := sdk.NewServer(&sdk.Implementation{Name: "protected", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "whoami", Description: "Says who the caller is."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			user := "nobody"
			if req.Extra != nil && req.Extra.TokenInfo != nil {
				user = req.Extra.TokenInfo.UserID
			}
			return textResult("you are " + user), nil, nil
		})
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	endpoint := hs.URL + "/mcp"
	a.resource = endpoint
	prm := hs.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: endpoint, AuthorizationServers: []string{a.srv.URL},
	}))
	mux.Handle("/mcp", auth.RequireBearerToken(a.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm})(
		sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)))
	return endpoint
}

// oauthFixture is a bridge with OAuth in front of protectedMCPServer.
type oauthFixture struct {
	bridge *Bridge
	url    string
	rt     *raptest.Runtime
	logs   *syncBuf
}

func startOAuthBridge(t *testing.T, mcpURL, tokenDir string) *oauthFixture {
	t.Helper()
	return startOAuthBridgeWith(t, mcpURL, tokenDir, nil)
}

func startOAuthBridgeWith(t *testing.T, mcpURL, tokenDir string, mut func(*OAuthOptions)) *oauthFixture {
	t.Helper()
	var handler atomic.Pointer[Bridge]
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.Load().ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	logs := &syncBuf{}
	oo := &OAuthOptions{TokenDir: tokenDir, RedirectURL: hs.URL + CallbackPath}
	if mut != nil {
		mut(oo)
	}
	b, err := New(&Options{Name: "protected", URL: mcpURL, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OAuth: oo})
	if err != nil {
		t.Fatal(err)
	}
	handler.Store(b)
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Shutdown(sctx)
	})
	rt, err := raptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return &oauthFixture{bridge: b, url: hs.URL, rt: rt, logs: logs}
}

// signInAs plays the user's browser: it waits for the call's oauth
// message (RAP OA-1), opens the link logged in as user, and follows the
// redirect to the bridge's callback.
func signInAs(t *testing.T, c *raptest.Call, user string) {
	t.Helper()
	var link string
	waitFor(t, "an oauth message", func() bool {
		for _, m := range c.Messages() {
			if o, ok := m.(*rap.OAuth); ok {
				link = o.AuthURL
				return true
			}
		}
		return false
	})
	resp, err := http.Get(link + "&login=" + url.QueryEscape(user))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.Path != CallbackPath {
		t.Fatalf("sign-in ended with %d at %s", resp.StatusCode, resp.Request.URL)
	}
}

func (f *oauthFixture) result(t *testing.T, c *raptest.Call) *rap.ToolResult {
	t.Helper()
	res, err := c.Result(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func hasOAuth(c *raptest.Call) bool {
	for _, m := range c.Messages() {
		if _, ok := m.(*rap.OAuth); ok {
			return true
		}
	}
	return false
}

// An HTTP MCP server that answers 401 gets the MCP
// authorization flow (protected resource metadata, authorization server
// metadata, dynamic client registration, PKCE): the link reaches the
// user as a RAP oauth message (OA-1), the bridge's redirect endpoint
// takes the code, and each RAP user_id gets their own token and session.
// Tokens are stored 0600 and never logged.
func TestOAuthSignInPerUser(t *testing.T) {
	a := newTestAuthServer(t)
	mcpURL := protectedMCPServer(t, a)
	dir := t.TempDir()
	f := startOAuthBridge(t, mcpURL, dir)
	ctx := ctxT(t)

	ts, err := f.rt.Discover(ctx, f.url)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ts); len(got) != 1 || got[0] != "protected_sign_in" {
		t.Fatalf("tools before any sign-in = %v, want only protected_sign_in", got)
	}
	c, err := f.rt.Invoke(ctx, f.url, "protected_sign_in", map[string]any{}, raptest.WithUserID("alice"))
	if err != nil {
		t.Fatal(err)
	}
	signInAs(t, c, "alice")
	if res := f.result(t, c); !strings.Contains(res.Text, "Signed in") || !strings.Contains(res.Text, "1 tools") {
		t.Fatalf("sign_in result = %q", res.Text)
	}
	if ts, err = f.rt.Discover(ctx, f.url); err != nil {
		t.Fatal(err)
	}
	if got := names(ts); len(got) != 1 || got[0] != "whoami" {
		t.Fatalf("tools after sign-in = %v, want whoami", got)
	}

	// alice is signed in: no link, her identity reaches the server.
	c, err = f.rt.Invoke(ctx, f.url, "whoami", map[string]any{}, raptest.WithUserID("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if res := f.result(t, c); res.Text != "you are alice" || hasOAuth(c) {
		t.Fatalf("alice's call = %q (oauth message: %v)", res.Text, hasOAuth(c))
	}
	// bob is not: his call shows him a link, then runs as bob.
	c, err = f.rt.Invoke(ctx, f.url, "whoami", map[string]any{}, raptest.WithUserID("bob"))
	if err != nil {
		t.Fatal(err)
	}
	signInAs(t, c, "bob")
	if res := f.result(t, c); res.Text != "you are bob" {
		t.Fatalf("bob's call = %q", res.Text)
	}
	if n := a.registrations.Load(); n < 1 {
		t.Errorf("dynamic client registrations = %d", n)
	}
	if n := a.exchanges.Load(); n != 2 {
		t.Errorf("code exchanges = %d, want 2 (alice, bob)", n)
	}

	files, _ := filepath.Glob(filepath.Join(dir, "protected", "*.json"))
	if len(files) != 2 {
		t.Fatalf("token files = %v, want one per user", files)
	}
	for _, p := range files {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, st.Mode().Perm())
		}
	}
	logs := f.logs.String()
	for _, tok := range a.tokens() {
		if strings.Contains(logs, tok) {
			t.Fatalf("a token reached the log")
		}
	}
}

// Tokens are durable and refreshed. A new bridge on
// the same token directory connects with the stored sign-in at start (no
// sign_in tool, no link); an expired access token is refreshed with the
// refresh token and the new one is stored.
func TestOAuthTokensSurviveRestartAndRefresh(t *testing.T) {
	a := newTestAuthServer(t)
	mcpURL := protectedMCPServer(t, a)
	dir := t.TempDir()
	f := startOAuthBridge(t, mcpURL, dir)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "protected_sign_in", map[string]any{}, raptest.WithUserID("alice"))
	if err != nil {
		t.Fatal(err)
	}
	signInAs(t, c, "alice")
	f.result(t, c)
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := f.bridge.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}

	// The access token expires while the bridge is down.
	files, _ := filepath.Glob(filepath.Join(dir, "protected", "*.json"))
	if len(files) != 1 {
		t.Fatalf("token files = %v", files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var st storedToken
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	old := st.Token.AccessToken
	a.mu.Lock()
	a.access[old] = tokRec{user: "alice", expires: time.Now().Add(-time.Minute)}
	a.mu.Unlock()
	st.Token.Expiry = time.Now().Add(-time.Minute)
	raw, _ = json.Marshal(&st)
	if err := os.WriteFile(files[0], raw, 0o600); err != nil {
		t.Fatal(err)
	}

	g := startOAuthBridge(t, mcpURL, dir)
	ts, err := g.rt.Discover(ctx, g.url)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ts); len(got) != 1 || got[0] != "whoami" {
		t.Fatalf("tools after restart = %v, want whoami (the stored sign-in)", got)
	}
	c, err = g.rt.Invoke(ctx, g.url, "whoami", map[string]any{}, raptest.WithUserID("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if res := g.result(t, c); res.Text != "you are alice" || hasOAuth(c) {
		t.Fatalf("alice's call after restart = %q (oauth message: %v)", res.Text, hasOAuth(c))
	}
	if n := a.refreshes.Load(); n < 1 {
		t.Errorf("refresh grants = %d, want at least 1", n)
	}
	raw, _ = os.ReadFile(files[0])
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	if st.Token.AccessToken == old {
		t.Errorf("the refreshed token was not stored")
	}
	if strings.Contains(g.logs.String(), st.Token.AccessToken) {
		t.Errorf("a token reached the log")
	}
}

// A stored sign-in the authorization server no longer
// honours (access and refresh tokens revoked) does not stop the bridge:
// it serves sign_in again.
func TestOAuthRevokedSignInAsksAgain(t *testing.T) {
	a := newTestAuthServer(t)
	mcpURL := protectedMCPServer(t, a)
	dir := t.TempDir()
	f := startOAuthBridge(t, mcpURL, dir)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "protected_sign_in", map[string]any{}, raptest.WithUserID("alice"))
	if err != nil {
		t.Fatal(err)
	}
	signInAs(t, c, "alice")
	f.result(t, c)
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := f.bridge.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	clear(a.access)
	clear(a.refresh)
	a.mu.Unlock()
	g := startOAuthBridge(t, mcpURL, dir)
	ts, err := g.rt.Discover(ctx, g.url)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ts); len(got) != 1 || got[0] != "protected_sign_in" {
		t.Fatalf("tools with a revoked sign-in = %v, want only protected_sign_in", got)
	}
}

// An OAuth bridge whose server cannot be reached at
// start fails to start (it is reported and skipped like any other), even
// with a stored sign-in.
func TestOAuthServerDownAtStart(t *testing.T) {
	dir := t.TempDir()
	st := tokenStore{dir: storeDir(dir, "protected")}
	if err := st.save("alice", &oauth2.Config{ClientID: "c"}, &oauth2.Token{AccessToken: "x", Expiry: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	b, err := New(&Options{Name: "protected", URL: "http://127.0.0.1:1/mcp", Logger: quietLogger(), ConnectTimeout: 5 * time.Second,
		OAuth: &OAuthOptions{TokenDir: dir, RedirectURL: "http://127.0.0.1:1" + CallbackPath}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err == nil {
		_ = b.Shutdown(context.Background())
		t.Fatal("Start succeeded with the server down")
	}
}

// A bridge whose own handler the browser cannot reach
// (inside rap serve) serves the redirect endpoint on a listener of its
// own, and the redirect URL names the port it bound.
func TestOAuthOwnCallbackListener(t *testing.T) {
	a := newTestAuthServer(t)
	mcpURL := protectedMCPServer(t, a)
	f := startOAuthBridgeWith(t, mcpURL, t.TempDir(), func(o *OAuthOptions) { o.RedirectURL, o.CallbackListen = "", "127.0.0.1:0" })
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "protected_sign_in", map[string]any{}, raptest.WithUserID("carol"))
	if err != nil {
		t.Fatal(err)
	}
	var link string
	waitFor(t, "an oauth message", func() bool {
		for _, m := range c.Messages() {
			if o, ok := m.(*rap.OAuth); ok {
				link = o.AuthURL
				return true
			}
		}
		return false
	})
	u, _ := url.Parse(link)
	redirect, _ := url.Parse(u.Query().Get("redirect_uri"))
	if redirect == nil || redirect.Host == "" || strings.HasPrefix(f.url, "http://"+redirect.Host) || redirect.Path != CallbackPath {
		t.Fatalf("redirect_uri = %v, want the bridge's own listener", redirect)
	}
	signInAs(t, c, "carol")
	if res := f.result(t, c); !strings.Contains(res.Text, "Signed in") {
		t.Fatalf("sign_in result = %q", res.Text)
	}
	if _, err := f.rt.Discover(ctx, f.url); err != nil {
		t.Fatal(err)
	}
	c, err = f.rt.Invoke(ctx, f.url, "whoami", map[string]any{}, raptest.WithUserID("carol"))
	if err != nil {
		t.Fatal(err)
	}
	if res := f.result(t, c); res.Text != "you are carol" {
		t.Fatalf("carol's call = %q", res.Text)
	}
}
