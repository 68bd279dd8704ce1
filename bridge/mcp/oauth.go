package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// OAuth for Streamable HTTP MCP servers. The MCP
// authorization flow itself is the SDK's: auth.AuthorizationCodeHandler
// discovers the protected resource metadata (RFC 9728) from the 401's
// WWW-Authenticate header or the well-known URLs, reads the authorization
// server's metadata (RFC 8414), registers the bridge as a client
// dynamically (RFC 7591) and runs the authorization code flow with PKCE,
// then refreshes the access token. The bridge supplies what the SDK leaves
// to the application:
//
//   - the user: tokens belong to a RAP user_id, so each user gets an MCP
//     session of their own (an MCP server binds its sessions to the
//     token's user);
//   - the link: the authorization URL goes to that user as a RAP oauth
//     message (RAP OA-1) on the call that needs it, which stays pending;
//   - the redirect endpoint: CallbackPath on the bridge's own HTTP
//     handler receives the code and hands it back to the waiting flow;
//   - the storage: one file per user, mode 0600, holding the token and the
//     client registration needed to refresh it (see tokenStore).
//
// Before any user has signed in the bridge cannot list the server's
// tools; it then serves one tool, {name}_sign_in, whose call runs the
// flow for its user and brings the server's tools in.

// CallbackPath is the path of the bridge's OAuth redirect endpoint, on
// the bridge's own HTTP handler.
const CallbackPath = "/oauth/callback"

// DefaultSignInTimeout is the default of OAuthOptions.SignInTimeout.
const DefaultSignInTimeout = 10 * time.Minute

// OAuthOptions enable the MCP authorization flow for a URL server.
type OAuthOptions struct {
	// TokenDir is the directory where the bridge keeps each user's
	// tokens, in a subdirectory per MCP server (created 0700; files
	// 0600). Required.
	TokenDir string
	// RedirectURL is the address of the bridge's CallbackPath as the
	// user's browser reaches it, such as
	// http://127.0.0.1:3001/oauth/callback. Required unless
	// CallbackListen is set.
	RedirectURL string
	// CallbackListen, when set, is an address such as "127.0.0.1:0" on
	// which Start opens a listener of its own that serves CallbackPath,
	// for a bridge whose handler the browser cannot reach (inside rap
	// serve). An empty RedirectURL then becomes
	// http://ADDRESS/oauth/callback with the port actually bound.
	CallbackListen string
	// ClientName is the client_name the bridge registers with; empty
	// means "gorap MCP bridge".
	ClientName string
	// SignInTimeout bounds how long a call waits for its user to finish
	// signing in; zero means DefaultSignInTimeout.
	SignInTimeout time.Duration
	// HTTPClient makes the discovery, registration and token requests;
	// nil means Options.HTTPClient, else http.DefaultClient.
	HTTPClient *http.Client
}

// errSignInNeeded is what the authorization flow returns when it runs
// outside a RAP call (at start, or on a background request): there is
// no user to show the link to.
var errSignInNeeded = errors.New("the MCP server asks for authorization and no user is signing in")

// oauthState is the OAuth side of a bridge.
type oauthState struct {
	opts   OAuthOptions
	store  tokenStore
	client *http.Client

	signInMu sync.Mutex // one sign_in at a time
	mu       sync.Mutex
	users    map[string]*userConn
	pending  map[string]chan callbackResult // by OAuth state
	mainUser string                         // whose token the main session uses
	signedIn bool                           // the main session is up

	callbackSrv *http.Server // with CallbackListen
}

// listen opens the CallbackListen listener and serves the redirect
// endpoint on it.
func (o *oauthState) listen() error {
	if o.opts.CallbackListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", o.opts.CallbackListen)
	if err != nil {
		return fmt.Errorf("opening the OAuth redirect endpoint on %s: %w (choose another address)", o.opts.CallbackListen, err)
	}
	if o.opts.RedirectURL == "" {
		o.opts.RedirectURL = "http://" + ln.Addr().String() + CallbackPath
	}
	mux := http.NewServeMux()
	mux.HandleFunc(CallbackPath, o.serveCallback)
	o.callbackSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = o.callbackSrv.Serve(ln) }()
	return nil
}

// closeListener stops the CallbackListen listener.
func (o *oauthState) closeListener() {
	if o.callbackSrv != nil {
		_ = o.callbackSrv.Close()
	}
}

// userConn is one user's OAuth handler and MCP session.
type userConn struct {
	user    string
	handler *auth.AuthorizationCodeHandler

	mu sync.Mutex // serialises connecting
	cs *sdk.ClientSession
}

type callbackResult struct {
	res *auth.AuthorizationResult
	err error
}

func newOAuthState(o OAuthOptions, server string, fallback *http.Client) (*oauthState, error) {
	if o.TokenDir == "" {
		return nil, fmt.Errorf("mcp bridge %q: OAuth needs a token directory (where each user's tokens are kept)", server)
	}
	u, err := url.Parse(o.RedirectURL)
	if o.RedirectURL == "" && o.CallbackListen != "" {
		err, u = nil, &url.URL{Scheme: "http", Host: "set-at-start"}
	}
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("mcp bridge %q: OAuth redirect URL %q is not an absolute http(s) URL; give the address of the bridge's %s as the user's browser reaches it", server, o.RedirectURL, CallbackPath)
	}
	if o.ClientName == "" {
		o.ClientName = "gorap MCP bridge"
	}
	if o.SignInTimeout <= 0 {
		o.SignInTimeout = DefaultSignInTimeout
	}
	c := o.HTTPClient
	if c == nil {
		c = fallback
	}
	if c == nil {
		c = http.DefaultClient
	}
	return &oauthState{
		opts: o, client: c, store: tokenStore{dir: storeDir(o.TokenDir, server)},
		users: map[string]*userConn{}, pending: map[string]chan callbackResult{},
	}, nil
}

// user returns the user's connection state, creating its OAuth handler
// (primed with the stored token, if any) on first use.
func (o *oauthState) user(id string) (*userConn, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if uc := o.users[id]; uc != nil {
		return uc, nil
	}
	cfg := &auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName:              o.opts.ClientName,
			RedirectURIs:            []string{o.opts.RedirectURL},
			GrantTypes:              []string{"authorization_code", "refresh_token"},
			ResponseTypes:           []string{"code"},
			TokenEndpointAuthMethod: "none",
		}},
		RedirectURL:              o.opts.RedirectURL,
		AuthorizationCodeFetcher: o.fetch,
		RequestRefreshToken:      true,
		Client:                   o.client,
		NewTokenSource: func(ctx context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
			if err := o.store.save(id, c, t); err != nil {
				return nil, err
			}
			return o.store.source(ctx, id, c, t), nil
		},
	}
	if st, err := o.store.load(id); err != nil {
		return nil, err
	} else if st != nil {
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, o.client)
		cfg.InitialTokenSource = o.store.source(ctx, id, st.config(), st.Token)
	}
	h, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return nil, fmt.Errorf("setting up OAuth: %w", err)
	}
	uc := &userConn{user: id, handler: h}
	o.users[id] = uc
	return uc, nil
}

// fetch is the SDK's AuthorizationCodeFetcher: it shows the link to the
// user of the call in ctx and waits for the redirect.
func (o *oauthState) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	f, _ := ctx.Value(inflightKey{}).(*inflight)
	if f == nil || f.ctx.Err() != nil {
		return nil, errSignInNeeded
	}
	u, err := url.Parse(args.URL)
	if err != nil {
		return nil, fmt.Errorf("the authorization URL does not parse: %w", err)
	}
	state := u.Query().Get("state")
	if state == "" {
		return nil, errors.New("the authorization URL has no state parameter")
	}
	ch := make(chan callbackResult, 1)
	o.mu.Lock()
	o.pending[state] = ch
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.pending, state)
		o.mu.Unlock()
	}()
	if err := f.call.RequestOAuth(ctx, args.URL); err != nil {
		return nil, fmt.Errorf("passing the sign-in link to the user: %w", err)
	}
	t := time.NewTimer(o.opts.SignInTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.res, r.err
	case <-t.C:
		return nil, fmt.Errorf("the user did not finish signing in within %s", o.opts.SignInTimeout)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// serveCallback is the OAuth redirect endpoint.
func (o *oauthState) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	o.mu.Lock()
	ch := o.pending[state]
	delete(o.pending, state)
	o.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if state == "" || ch == nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, "<!doctype html><p>This sign-in link is unknown or was already used. Call the tool again to get a new one.</p>")
		return
	}
	if e := q.Get("error"); e != "" {
		ch <- callbackResult{err: fmt.Errorf("the authorization server refused: %s", e)}
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "<!doctype html><p>Sign-in refused (%s). You can close this window.</p>", html.EscapeString(e))
		return
	}
	ch <- callbackResult{res: &auth.AuthorizationResult{Code: q.Get("code"), State: state, Iss: q.Get("iss")}}
	fmt.Fprint(w, "<!doctype html><p>Signed in. You can close this window and return to the conversation.</p>")
}

// sessionFor returns the MCP session a call runs on: the main session,
// or with OAuth the session of the call's user, signing them in (link
// shown on the call, see fetch) when they have no token yet. ctx carries
// the call's inflight value.
func (b *Bridge) sessionFor(ctx context.Context, c *rap.Call) (*sdk.ClientSession, error) {
	o := b.oauth
	if o == nil {
		return b.currentSession(ctx, b.opts.RestartWait)
	}
	user := c.Invocation.UserID
	o.mu.Lock()
	main := o.signedIn && user == o.mainUser
	o.mu.Unlock()
	if main {
		return b.currentSession(ctx, b.opts.RestartWait)
	}
	uc, err := o.user(user)
	if err != nil {
		return nil, fmt.Errorf("Error: %v", err)
	}
	uc.mu.Lock()
	defer uc.mu.Unlock()
	if uc.cs != nil {
		return uc.cs, nil
	}
	cctx, cancel := context.WithTimeout(ctx, o.opts.SignInTimeout+b.opts.ConnectTimeout)
	defer cancel()
	cs, err := b.client.Connect(cctx, b.httpTransport(uc.handler), nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("Error: signing in to the %s failed: %v. Call the tool again to retry; the user gets a new sign-in link.", b.describe(), err)
	}
	uc.cs = cs
	go func() {
		_ = cs.Wait()
		uc.mu.Lock()
		if uc.cs == cs {
			uc.cs = nil
		}
		uc.mu.Unlock()
	}()
	return cs, nil
}

// startOAuth connects the main session with the token of the user who
// signed in last. Without one it serves the sign_in tool instead, and
// returns nil: the bridge is up, waiting for a user.
func (b *Bridge) startOAuth(ctx context.Context) (*sdk.ClientSession, error) {
	o := b.oauth
	if err := o.listen(); err != nil {
		return nil, fmt.Errorf("mcp bridge %q: %w", b.opts.Name, err)
	}
	user, ok := o.store.latest()
	if ok {
		o.mu.Lock()
		o.mainUser = user
		o.mu.Unlock()
		cs, err := b.connect(ctx)
		if err == nil {
			o.mu.Lock()
			o.signedIn = true
			o.mu.Unlock()
			return cs, nil
		}
		if !errors.Is(err, errSignInNeeded) && !strings.Contains(err.Error(), errSignInNeeded.Error()) {
			o.closeListener()
			return nil, err // not an authorization problem: reported like any server that cannot start
		}
		b.log.Warn("mcp bridge: the stored sign-in no longer works; waiting for a user to sign in again")
	}
	b.addSignInTool()
	return nil, nil
}

// signInToolName is the name of the tool served until a user signs in.
func (b *Bridge) signInToolName() string { return b.OwnToolName("sign_in") }

func (b *Bridge) addSignInTool() {
	b.srv.AddRawTool(&rap.Tool{
		Name: b.signInToolName(),
		Description: fmt.Sprintf("Sign in to the MCP server %q. Its tools become available once the user has signed in; the user is shown a link to authorize access.",
			b.opts.Name),
		InputSchema:   proxyListSchema,
		DisplayScript: rhaiString("Signing in to " + b.opts.Name),
	}, b.signIn)
}

// signIn serves the sign_in tool: it signs the call's user in, makes
// their session the main one and lists the server's tools.
func (b *Bridge) signIn(ctx context.Context, c *rap.Call, _ json.RawMessage) (*rap.Reply, error) {
	o := b.oauth
	o.signInMu.Lock()
	defer o.signInMu.Unlock()
	if b.signedIn() {
		return &rap.Reply{Text: fmt.Sprintf("Already signed in to the MCP server %q; its tools are available.", b.opts.Name)}, nil
	}
	f := &inflight{call: c, ctx: ctx}
	b.inflight.add(f)
	defer b.inflight.remove(f)
	user := c.Invocation.UserID
	uc, err := o.user(user)
	if err != nil {
		return nil, fmt.Errorf("Error: %v", err)
	}
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, inflightKey{}, f), o.opts.SignInTimeout+b.opts.ConnectTimeout)
	defer cancel()
	cs, err := b.client.Connect(cctx, b.httpTransport(uc.handler), nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("Error: signing in to the %s failed: %v. Call %s again to retry.", b.describe(), err, b.signInToolName())
	}
	o.mu.Lock()
	o.mainUser, o.signedIn = user, true
	o.mu.Unlock()
	b.srv.RemoveTool(b.signInToolName())
	if err := b.adopt(context.WithoutCancel(ctx), cs); err != nil {
		return nil, fmt.Errorf("Error: %v", err)
	}
	b.mu.Lock()
	n := len(b.tools)
	b.mu.Unlock()
	// A RAP session keeps the tools it was created with (RAP TS-4): the
	// new tools reach conversations started from now on.
	return &rap.Reply{Text: fmt.Sprintf("Signed in to the MCP server %q; its %d tools are now available to conversations started from now on (this one keeps the tools it began with).", b.opts.Name, n)}, nil
}

func (b *Bridge) signedIn() bool {
	b.oauth.mu.Lock()
	defer b.oauth.mu.Unlock()
	return b.oauth.signedIn
}

// mainHandler returns the OAuth handler of the main session's user.
func (o *oauthState) mainHandler() auth.OAuthHandler {
	o.mu.Lock()
	user := o.mainUser
	o.mu.Unlock()
	uc, err := o.user(user)
	if err != nil {
		return nil
	}
	return uc.handler
}

// closeUsers closes every user's session.
func (o *oauthState) closeUsers() {
	o.mu.Lock()
	users := make([]*userConn, 0, len(o.users))
	for _, uc := range o.users {
		users = append(users, uc)
	}
	o.mu.Unlock()
	for _, uc := range users {
		uc.mu.Lock()
		cs := uc.cs
		uc.cs = nil
		uc.mu.Unlock()
		if cs != nil {
			_ = cs.Close()
		}
	}
}
