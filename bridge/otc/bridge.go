package otc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorap/gorap/rap"
)

// Defaults for Options.
const (
	DefaultCallTimeout     = 5 * time.Minute
	DefaultAuthTimeout     = 10 * time.Minute
	DefaultAuthPollMin     = 1 * time.Second
	DefaultAuthPollMax     = 15 * time.Second
	DefaultWorkers         = 64
	maxImageArtifactBytes  = 2 << 20 // base64 grows it by a third; stays under rap.MaxCallbackBytes
	maxTextArtifactBytes   = 1 << 20
	artifactFetchTimeout   = 30 * time.Second
	authCheckRequestWindow = 10 * time.Second
)

// Options configure a Bridge.
type Options struct {
	// Name is the RAP toolset name (default "otc").
	Name string
	// Client reaches the worker; required. Its Dialect is detected (and
	// set) when empty.
	Client *Client
	// Secrets resolves the secrets tools list in their requirements
	// (default EnvFileSecrets{} : the environment only).
	Secrets SecretResolver
	// Tokens, when set, returns the authorization token the bridge holds
	// for a provider and user ("" when none). Tokens learnt from a
	// completed OXP authorization are kept in memory as well.
	Tokens func(ctx context.Context, provider, userID string) (string, error)
	// CallTimeout bounds one HTTP call to the worker (default
	// DefaultCallTimeout); a worker that does not answer in time ends the
	// RAP call with an "Error: " result.
	CallTimeout time.Duration
	// AuthTimeout bounds the wait for a user to complete an authorization
	// (default DefaultAuthTimeout).
	AuthTimeout time.Duration
	// AuthPollMin and AuthPollMax bound the backoff between authorization
	// status checks (defaults DefaultAuthPollMin, DefaultAuthPollMax).
	AuthPollMin, AuthPollMax time.Duration
	// Server are the options of the RAP tool server; nil means rap's
	// defaults (Workers defaults to DefaultWorkers, since bridged calls
	// wait on the network).
	Server *rap.ServerOptions
	// Logger receives the bridge's logs (default slog.Default()). Inputs,
	// secrets, tokens and authorization URLs are never logged.
	Logger *slog.Logger
}

// Bridge serves one OTC worker's tools as a RAP tool server.
type Bridge struct {
	opts     Options
	client   *Client
	log      *slog.Logger
	srv      *rap.Server
	tools    []*Mapped
	problems []Problem

	mu     sync.Mutex
	tokens map[string]string // provider + "\x00" + user → token
}

// New reaches the worker (detecting its dialect when not set), lists its
// tools and builds the RAP server. Tools that cannot be converted are logged
// and left out (see Problems). A worker that is down, refuses the secret or
// lists no usable tool is an error. Client is required, so nil options are
// an error naming it. New fills the defaults in copies: the caller's
// Options and its Server are left unchanged. The Client is used as given,
// not copied: Client.Detect fills its Dialect when empty.
func New(ctx context.Context, opts *Options) (*Bridge, error) {
	if opts == nil || opts.Client == nil || opts.Client.BaseURL == "" {
		return nil, errors.New("otc: no worker URL given; set Options.Client to an otc.Client with the worker's BaseURL")
	}
	o := *opts
	var server rap.ServerOptions
	if o.Server != nil {
		server = *o.Server
	}
	o.Server = &server
	if u, err := url.Parse(o.Client.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("otc: worker URL %q is not an http or https URL", o.Client.BaseURL)
	}
	if o.Name == "" {
		o.Name = "otc"
	}
	if o.Secrets == nil {
		o.Secrets = EnvFileSecrets{}
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.AuthTimeout <= 0 {
		o.AuthTimeout = DefaultAuthTimeout
	}
	if o.AuthPollMin <= 0 {
		o.AuthPollMin = DefaultAuthPollMin
	}
	if o.AuthPollMax < o.AuthPollMin {
		o.AuthPollMax = max(DefaultAuthPollMax, o.AuthPollMin)
	}
	if o.Server.Workers <= 0 {
		o.Server.Workers = DefaultWorkers
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Server.Logger == nil {
		o.Server.Logger = o.Logger
	}
	b := &Bridge{opts: o, client: o.Client, log: o.Logger.With("otc_worker", o.Client.BaseURL), tokens: map[string]string{}}
	if err := b.client.Detect(ctx); err != nil {
		return nil, fmt.Errorf("otc: %w", err)
	}
	if err := b.client.Health(ctx); err != nil {
		return nil, fmt.Errorf("otc: %w", err)
	}
	tools, probs, err := b.client.Tools(ctx)
	if err != nil {
		return nil, fmt.Errorf("otc: listing the worker's tools: %w", err)
	}
	for _, p := range probs {
		b.log.Warn("otc: tool left out: its definition cannot be converted", "tool", p.Tool, "problem", p.Err.Error())
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("otc: the worker at %s lists no tool the bridge can serve (%d left out; see the log)", b.client.BaseURL, len(probs))
	}
	b.tools, b.problems = tools, probs
	if o.Server.Description == "" {
		o.Server.Description = fmt.Sprintf("Tools of the Open Tool Calling (%s) worker at %s, bridged to RAP.", b.client.Dialect, b.client.BaseURL)
	}
	b.srv = rap.NewServer(o.Name, o.Server)
	for _, m := range tools {
		b.srv.AddRawTool(&m.Tool, b.handler(m))
	}
	b.log.Info("otc: bridge ready", "dialect", string(b.client.Dialect), "tools", len(tools), "left_out", len(probs))
	return b, nil
}

// Server returns the RAP tool server; serve it with Serve, ListenAndServe,
// or Start and ServeHTTP.
func (b *Bridge) Server() *rap.Server { return b.srv }

// Tools returns the converted tools.
func (b *Bridge) Tools() []*Mapped { return b.tools }

// Problems returns the tool definitions that were left out.
func (b *Bridge) Problems() []Problem { return b.problems }

// Dialect returns the worker's dialect.
func (b *Bridge) Dialect() Dialect { return b.client.Dialect }

// RunID returns the RAP session of an invocation: its root thread, the
// first of thread_ancestors, or its own group_id for a root thread.
func RunID(inv *rap.Invocation) string {
	if len(inv.ThreadAncestors) > 0 && inv.ThreadAncestors[0] != "" {
		return inv.ThreadAncestors[0]
	}
	return inv.GroupID
}

func (b *Bridge) handler(m *Mapped) rap.RawToolHandler {
	return func(ctx context.Context, c *rap.Call, args json.RawMessage) (*rap.Reply, error) {
		inv := c.Invocation
		log := b.log.With("tool", m.Tool.Name, "id", inv.ID)
		req := &CallRequest{
			RunID: RunID(inv), ExecutionID: inv.ID,
			Toolkit: m.Toolkit, Tool: m.Name, Version: m.Version, ToolID: m.ToolID,
			Inputs: args, UserID: inv.UserID,
		}
		if len(m.Secrets) > 0 {
			req.Secrets = map[string]string{}
			for _, k := range m.Secrets {
				v, err := b.opts.Secrets.Secret(ctx, k)
				if err != nil {
					log.Warn("otc: secret missing; call not sent", "secret", k)
					return nil, fmt.Errorf("Error: the tool %s cannot run because the bridge lacks a secret it needs: %v. Tell the user; retrying will not help until it is set", m.Tool.Name, err)
				}
				req.Secrets[k] = v
			}
		}
		if m.Provider != "" {
			if tok := b.token(ctx, m.Provider, inv.UserID); tok != "" {
				req.Tokens = map[string]string{m.Provider: tok}
			}
		}
		st, err := b.startState(ctx, c, log, m)
		if err != nil {
			return nil, err
		}
		authorized := false
		for {
			if st.Phase == phaseAuth {
				done, err := b.awaitAuth(ctx, c, log, m, req, &st)
				if err != nil {
					return nil, err
				}
				if done != nil {
					log.Info("otc: call done after authorization", "outcome", done.kind())
					return b.reply(ctx, log, m, done), nil
				}
				// Authorized: the call is sent again. The journal keeps
				// the authorization phase, so that a restart checks the
				// authorization (and learns its token) again first.
				authorized = true
			}
			out, err := b.call(ctx, req)
			if err != nil {
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				log.Warn("otc: call failed", "err", err.Error())
				return nil, errorReply(m, err, b.opts.CallTimeout)
			}
			if out.Auth == nil {
				log.Info("otc: call done", "outcome", out.kind())
				return b.reply(ctx, log, m, out), nil
			}
			if authorized {
				return nil, fmt.Errorf("Error: the tool %s still asks for authorization after the user completed it; ask the user to check the account they authorized, then try again", m.Tool.Name)
			}
			if out.Auth.URL == "" {
				return nil, fmt.Errorf("Error: the tool %s needs an authorization but its server gave no link to complete it; tell the user", m.Tool.Name)
			}
			if err := c.RequestOAuth(ctx, out.Auth.URL); err != nil {
				return nil, fmt.Errorf("Error: the tool %s needs the user to authorize it, but the link could not be shown: %v", m.Tool.Name, err)
			}
			st = callState{Phase: phaseAuth, Auth: &savedChallenge{ID: out.Auth.ID, CheckURL: out.Auth.CheckURL}, AuthDeadline: time.Now().Add(b.opts.AuthTimeout)}
			b.save(ctx, c, log, st)
		}
	}
}

func (o *Outcome) kind() string {
	switch {
	case o.Error != nil:
		return "error"
	case o.Auth != nil:
		return "requires_authorization"
	case o.Artifact != nil:
		return "artifact"
	}
	return "value"
}

func (b *Bridge) call(ctx context.Context, req *CallRequest) (*Outcome, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, b.opts.CallTimeout, errCallTimeout)
	defer cancel()
	out, err := b.client.Call(cctx, req)
	if err != nil && errors.Is(context.Cause(cctx), errCallTimeout) && ctx.Err() == nil {
		return nil, errCallTimeout
	}
	return out, err
}

var errCallTimeout = errors.New("the worker did not answer in time")

func errorReply(m *Mapped, err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, errCallTimeout):
		return fmt.Errorf("Error: the tool %s did not answer within %s; the worker may be overloaded or stuck. The call may still complete on the worker's side, so check before retrying", m.Tool.Name, timeout)
	case errors.Is(err, ErrUnauthorized):
		return fmt.Errorf("Error: the tool server refused the bridge's credentials, so %s did not run. This is a configuration problem to report to the user (the bridge's worker secret is wrong); retrying will not help", m.Tool.Name)
	}
	return fmt.Errorf("Error: the tool %s could not be run: %v. The worker may be down; the call may or may not have run, so check before retrying", m.Tool.Name, err)
}

func tokenKey(provider, user string) string { return provider + "\x00" + user }

func (b *Bridge) token(ctx context.Context, provider, user string) string {
	b.mu.Lock()
	tok := b.tokens[tokenKey(provider, user)]
	b.mu.Unlock()
	if tok == "" && b.opts.Tokens != nil {
		t, err := b.opts.Tokens(ctx, provider, user)
		if err != nil {
			b.log.Warn("otc: token lookup failed", "provider", provider, "err", err.Error())
		}
		tok = t
	}
	return tok
}

// awaitAuth waits until the authorization of st.Auth is done, the user
// having been shown its link: by polling check_url when the challenge has
// one (OXP), otherwise by repeating the call until the worker stops asking
// (Arcade workers report no separate status route). It returns the outcome
// when a repeated call already ran the tool, nothing when the call should
// now be sent again, or the error result.
func (b *Bridge) awaitAuth(ctx context.Context, c *rap.Call, log *slog.Logger, m *Mapped, req *CallRequest, st *callState) (*Outcome, error) {
	ch := st.Auth
	log.Info("otc: waiting for authorization", "provider", m.Provider, "check_url", ch.CheckURL != "")
	deadline := st.AuthDeadline
	wait := b.opts.AuthPollMin
	timer := time.NewTimer(min(wait, max(time.Until(deadline), time.Millisecond)))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-timer.C:
		}
		if ch.CheckURL != "" {
			cctx, cancel := context.WithTimeout(ctx, authCheckRequestWindow)
			status, tok, err := b.client.AuthStatus(cctx, ch.CheckURL)
			cancel()
			switch {
			case err != nil:
				log.Debug("otc: authorization status check failed; will retry", "err", err.Error())
			case status == "completed" || status == "authorized":
				if tok != "" {
					provider := cmp(m.Provider, ch.ID)
					b.mu.Lock()
					b.tokens[tokenKey(provider, req.UserID)] = tok
					b.mu.Unlock()
					if req.Tokens == nil {
						req.Tokens = map[string]string{}
					}
					req.Tokens[provider] = tok
				}
				return nil, nil
			case status == "failed" || status == "denied" || status == "expired":
				return nil, fmt.Errorf("Error: the user's authorization for %s ended with status %q, so the tool did not run. Ask the user whether to try again", m.Tool.Name, status)
			}
		} else {
			// A repeated call may run the tool. Arcade workers do not
			// promise that repeating a call is harmless, so the journal
			// says a call is in flight until its answer is in.
			if !b.repeatable() {
				st.Phase = phaseCall
				b.save(ctx, c, log, *st)
			}
			out, err := b.call(ctx, req)
			if err != nil {
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				log.Debug("otc: authorization retry failed; will retry", "err", err.Error())
			} else if out.Auth == nil {
				// The worker ran the tool: deliver this outcome.
				return out, nil
			}
			if !b.repeatable() {
				st.Phase = phaseAuth
				b.save(ctx, c, log, *st)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("Error: the tool %s needs the user to authorize access, and the authorization was not completed within %s. Tell the user to open the authorization link they were shown, finish signing in, and then ask again", m.Tool.Name, b.opts.AuthTimeout)
		}
		wait = min(wait*2, b.opts.AuthPollMax)
		timer.Reset(min(wait, max(time.Until(deadline), time.Millisecond)))
	}
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// reply turns a worker outcome into the RAP result.
func (b *Bridge) reply(ctx context.Context, log *slog.Logger, m *Mapped, o *Outcome) *rap.Reply {
	switch {
	case o.Error != nil:
		if o.Error.DeveloperMessage != "" {
			log.Warn("otc: tool error", "developer_message", o.Error.DeveloperMessage, "kind", o.Error.Kind)
		}
		return rap.Text(FitText(ErrorText(o.Error), maxResultText))
	case o.Artifact != nil:
		return b.artifactReply(ctx, log, o.Artifact)
	}
	return rap.Text(FitText(ValueText(o.Value), maxResultText))
}

// maxResultText bounds the text of a result so that the tool_result
// callback stays under rap.MaxCallbackBytes (4 MiB) even with JSON escaping.
const maxResultText = 1 << 20

// FitText returns s, or when it is longer than limit bytes its first
// limit bytes (cut at a character boundary) and a note saying how much was
// left out.
func FitText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[truncated by the OTC bridge: the tool's value was %d bytes; only the first %d are shown]", len(s), cut)
}

// ValueText renders a value result: a JSON string as its text, anything else
// as compact JSON.
func ValueText(v json.RawMessage) string {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s
	}
	var x any
	if err := json.Unmarshal(v, &x); err == nil {
		if b, err := marshal(x); err == nil {
			return string(b)
		}
	}
	return string(v)
}

// ErrorText renders a tool error for the model: "Error: " and the message,
// the additional prompt content, and when the call can be retried the
// retry advice. The developer message is not included.
func ErrorText(e *ToolError) string {
	msg := strings.TrimSpace(e.Message)
	if msg == "" {
		msg = "the tool failed without saying why"
	}
	if !strings.HasPrefix(msg, "Error:") {
		msg = "Error: " + msg
	}
	var sb strings.Builder
	sb.WriteString(msg)
	if e.AdditionalPromptContent != "" {
		sb.WriteString("\n")
		sb.WriteString(e.AdditionalPromptContent)
	}
	if e.CanRetry {
		if e.RetryAfterMS != nil && *e.RetryAfterMS > 0 {
			fmt.Fprintf(&sb, "\nThis call can be retried after %s.", (time.Duration(*e.RetryAfterMS) * time.Millisecond).String())
		} else {
			sb.WriteString("\nThis call can be retried.")
		}
	} else {
		sb.WriteString("\nRetrying the same call will not help.")
	}
	return sb.String()
}

// artifactReply gives the model what it can use of an artifact: an image as
// image content, a text as text, anything else (or anything that cannot be
// fetched) as a description with URL, MIME type and size.
func (b *Bridge) artifactReply(ctx context.Context, log *slog.Logger, a *Artifact) *rap.Reply {
	desc := ArtifactDescription(a)
	ct := strings.ToLower(strings.TrimSpace(strings.Split(a.ContentType, ";")[0]))
	var limit int64
	switch {
	case strings.HasPrefix(ct, "image/"):
		limit = maxImageArtifactBytes
	case strings.HasPrefix(ct, "text/") || ct == "application/json":
		limit = maxTextArtifactBytes
	default:
		return rap.Text(desc)
	}
	data, err := b.fetch(ctx, a.URL, limit)
	if err != nil {
		log.Warn("otc: artifact not fetched; describing it instead", "err", err.Error())
		return rap.Text(desc)
	}
	if strings.HasPrefix(ct, "image/") {
		return &rap.Reply{Text: desc, Content: []rap.ContentItem{
			rap.TextContent(desc),
			rap.ImageContent(base64.StdEncoding.EncodeToString(data), ct),
		}}
	}
	text := FitText(string(data), maxTextArtifactBytes/2)
	return &rap.Reply{Text: text, Content: []rap.ContentItem{rap.TextContent(desc), rap.TextContent(text)}}
}

// ArtifactDescription describes an artifact in words.
func ArtifactDescription(a *Artifact) string {
	var sb strings.Builder
	sb.WriteString("Artifact")
	if a.Meta.Description != "" {
		sb.WriteString(": " + a.Meta.Description)
	}
	if a.URL != "" {
		sb.WriteString("\nURL: " + a.URL)
	}
	if a.ContentType != "" {
		sb.WriteString("\nMIME type: " + a.ContentType)
	}
	if a.Size > 0 {
		fmt.Fprintf(&sb, "\nSize: %d bytes", a.Size)
	}
	return sb.String()
}

func (b *Bridge) fetch(ctx context.Context, raw string, limit int64) ([]byte, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("artifact URL is not http(s)")
	}
	ctx, cancel := context.WithTimeout(ctx, artifactFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.client.http().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("artifact URL answered %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("artifact is larger than %d bytes", limit)
	}
	return data, nil
}
