// Package anthropic runs completions against Anthropic's Messages API with
// the official Go SDK. It implements model.Provider: the conversation, the
// system prompt and the tools are mapped to a streaming messages request,
// text deltas are passed on as they arrive, and tool_use blocks are
// assembled from their input_json_delta pieces.
//
// The API key comes from Options.APIKey or the ANTHROPIC_API_KEY environment
// variable; the base URL from Options.BaseURL, ANTHROPIC_BASE_URL or the
// public endpoint. Only these two variables are read: no profile files, no
// other credential sources.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/gorap/gorap/model"
)

// Defaults used when Options leaves a field empty.
const (
	DefaultModel     = "claude-sonnet-4-5"
	DefaultMaxTokens = 4096
	DefaultBaseURL   = "https://api.anthropic.com"
)

// Environment variables New reads when Options leaves the field empty.
const (
	EnvAPIKey  = "ANTHROPIC_API_KEY"
	EnvBaseURL = "ANTHROPIC_BASE_URL"
)

// maxOutputBytes bounds the text and tool input one completion may
// accumulate, so a misbehaving server cannot exhaust memory.
const maxOutputBytes = 16 << 20

// Options configure a Provider. Every field is optional except that an API
// key must come from APIKey or the environment.
type Options struct {
	// APIKey authenticates requests; empty means $ANTHROPIC_API_KEY.
	APIKey string
	// BaseURL is the API root, such as "https://api.anthropic.com";
	// empty means $ANTHROPIC_BASE_URL, then DefaultBaseURL.
	BaseURL string
	// Model is the model id, such as "claude-sonnet-4-5"; empty means
	// DefaultModel.
	Model string
	// MaxTokens caps each completion when the request sets no limit;
	// zero means DefaultMaxTokens.
	MaxTokens int
	// HTTPClient sends the requests; nil means model.DefaultHTTPClient.
	HTTPClient *http.Client
	// SupportsImages overrides whether tool-result images are sent to the
	// model. Nil means true: current Claude models accept images.
	SupportsImages *bool
	// ServerCompaction overrides whether the model has Anthropic's
	// server-side compaction (model.ServerCompactor). Nil means the
	// models Anthropic documents it for (claude-opus-4-6,
	// claude-sonnet-4-6 and their snapshots); true is for a later model
	// that has it too.
	ServerCompaction *bool
}

// Provider is a model.Provider backed by the Anthropic Messages API. It is
// safe for concurrent use.
type Provider struct {
	key       string // masked in every error
	model     string
	maxTokens int
	images    bool
	baseURL   string
	messages  sdk.MessageService           // the reference encoding (params) and tests
	client    sdk.Client                   // sends the requests (Complete)
	head      atomic.Pointer[encodedHead]  // the last head encoded (wire.go)
	tools     atomic.Pointer[encodedTools] // the last tools encoded (wire.go)
	// compaction is whether the model has server-side compaction
	// (compaction.go); ctxMgmt the last context_management encoded.
	compaction bool
	ctxMgmt    atomic.Pointer[contextManagement]
	// leaseBodies is whether request bodies are built in reused buffers
	// (model.BodyLease): only over net/http's own Transport, whose
	// httptrace hooks tell when a body has been written; a custom
	// RoundTripper might keep reading a body after its response.
	leaseBodies bool
}

var _ model.Provider = (*Provider)(nil)

// New returns a Provider configured by the options and the environment;
// nil options take every default (the API key then comes from
// $ANTHROPIC_API_KEY). New does not change the caller's Options. It fails
// when no API key is configured or the base URL is not an http(s) URL.
func New(o *Options) (*Provider, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	key := opts.APIKey
	if key == "" {
		key = os.Getenv(EnvAPIKey)
	}
	if key == "" {
		return nil, fmt.Errorf("anthropic: no API key: set %s (or Options.APIKey)", EnvAPIKey)
	}
	base := opts.BaseURL
	if base == "" {
		base = os.Getenv(EnvBaseURL)
	}
	if base == "" {
		base = DefaultBaseURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: base URL %q is not an http(s) URL: check %s or Options.BaseURL", base, EnvBaseURL)
	}
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("anthropic: MaxTokens is %d: use a positive number, or 0 for the default %d", opts.MaxTokens, DefaultMaxTokens)
	}
	p := &Provider{
		key:       key,
		model:     opts.Model,
		maxTokens: opts.MaxTokens,
		images:    true,
		baseURL:   base,
	}
	if p.model == "" {
		p.model = DefaultModel
	}
	if p.maxTokens == 0 {
		p.maxTokens = DefaultMaxTokens
	}
	if opts.SupportsImages != nil {
		p.images = *opts.SupportsImages
	}
	p.compaction = compactionSupported(p.model)
	if opts.ServerCompaction != nil {
		p.compaction = *opts.ServerCompaction
	}
	ropts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithAPIKey(key),
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = model.DefaultHTTPClient() // keeps connections for concurrent completions
	}
	p.leaseBodies = model.CanLeaseBodies(hc)
	ropts = append(ropts, option.WithHTTPClient(hc))
	p.messages = sdk.NewMessageService(ropts...)
	p.client = sdk.NewClient(ropts...)
	return p, nil
}

// Name reports "anthropic:" followed by the model id.
func (p *Provider) Name() string { return "anthropic:" + p.model }

// SupportsImages reports whether tool-result images reach the model; when
// false each image is replaced by a text placeholder (RAP RE-2).
func (p *Provider) SupportsImages() bool { return p.images }

// Complete streams one completion. Text deltas go to s (which may be nil) as
// they arrive; the returned Response holds the whole assistant turn.
// StopReason is the API's own value ("end_turn", "tool_use", "max_tokens",
// ...).
func (p *Provider) Complete(ctx context.Context, req model.Request, s model.Stream) (_ *model.Response, err error) {
	// An error body may echo the API key: never pass it on.
	defer func() { err = model.RedactError(err, p.key) }()
	// The body's buffer, reused once the request is over; nil when bodies
	// are not leased. After an error End keeps it from reuse: the SDK's
	// error keeps the request, whose GetBody reads the body.
	var lease *model.BodyLease
	if p.leaseBodies {
		lease = model.LendBody()
		ctx = lease.Context(ctx)
	}
	defer func() { lease.End(err) }()
	body, berr := p.encode(lease.Buffer(), req, true)
	if berr != nil {
		return nil, berr
	}
	lease.Keep(body) // the buffer as grown
	// The body is encoded here (see wire.go), with "stream":true where
	// MessageService.NewStreaming would add it by rewriting the whole body
	// (sjson, a copy per completion). The SDK sends it, retries, and splits
	// the event stream into events (ssestream.Decoder); each event is
	// decoded here into the fields the accumulator reads (event.go),
	// without encoding/json's set-up and reflection for every event.
	var raw *http.Response
	var ropts []option.RequestOption
	if req.CompactAt > 0 || len(req.Compaction) > 0 {
		ropts = append(ropts, option.WithHeaderAdd("anthropic-beta", CompactionBeta))
	}
	if err := p.client.Post(ctx, "v1/messages", body, &raw, ropts...); err != nil {
		return nil, p.describe(ctx, err)
	}
	events := ssestream.NewDecoder(raw)
	if events == nil {
		return nil, fmt.Errorf("anthropic: %s: the response has no body; retry the request", p.model)
	}
	defer events.Close()

	var (
		acc      accumulator
		finished bool
	)
	for events.Next() {
		e := events.Event()
		switch e.Type {
		case "", "ping":
			continue
		case "error":
			return nil, p.describe(ctx, streamError(raw, e.Data))
		}
		if len(bytes.TrimSuffix(e.Data, []byte("\n"))) == 0 {
			continue
		}
		model.Activity(s)
		var ev event
		if err := ev.UnmarshalJSON(e.Data); err != nil {
			return nil, fmt.Errorf("anthropic: %s: the API sent a %s event that is not valid: %w; retry the request", p.model, e.Type, err)
		}
		if ev.Type == "message_stop" {
			finished = true
		}
		if err := acc.add(&ev, e.Data, s); err != nil {
			return nil, fmt.Errorf("anthropic: %s: %w", p.model, err)
		}
	}
	if err := events.Err(); err != nil {
		return nil, p.describe(ctx, err)
	}
	if !finished {
		if ctx.Err() != nil {
			return nil, p.describe(ctx, ctx.Err())
		}
		return nil, fmt.Errorf("anthropic: %s: the response stream ended before message_stop (connection lost?); retry the request", p.model)
	}
	return acc.response(p.model)
}

// params builds the Messages API request for req from scratch, with the
// SDK's types: the reference that body, which sends the same bytes, is
// tested against.
func (p *Provider) params(req model.Request) (sdk.MessageNewParams, error) {
	limit := req.MaxTokens
	if limit <= 0 {
		limit = p.maxTokens
	}
	params := sdk.MessageNewParams{
		Model:     sdk.Model(p.model),
		MaxTokens: int64(limit),
	}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for i, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return params, fmt.Errorf("anthropic: tools[%d] (%s): %w", i, t.Name, err)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: tool})
	}
	if n := len(params.System); n > 0 {
		params.System[n-1].CacheControl = sdk.NewCacheControlEphemeralParam()
	} else if n := len(params.Tools); n > 0 {
		params.Tools[n-1].OfTool.CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	turns, stable, err := model.NormalizeSettled(req.Messages, req.Settled)
	if err != nil {
		return params, fmt.Errorf("anthropic: %w", err)
	}
	if len(turns) == 0 {
		return params, errors.New("anthropic: the request has no messages with content: add a user message")
	}
	for i, t := range turns {
		m, err := p.message(t)
		if err != nil {
			return params, fmt.Errorf("anthropic: conversation turn %d (%s): %w", i, t.Role, err)
		}
		if i == stable-1 {
			setCacheControl(m.Content)
		}
		params.Messages = append(params.Messages, m)
	}
	return params, nil
}

// toolParam maps a tool spec; the input schema must be a JSON object whose
// type, if given, is "object".
func toolParam(t model.ToolSpec) (*sdk.ToolParam, error) {
	schema := map[string]any{}
	if len(t.InputSchema) > 0 {
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema == nil {
			return nil, fmt.Errorf("input_schema is not a JSON object: fix the tool's inputSchema")
		}
	}
	if typ, ok := schema["type"]; ok && typ != "object" {
		return nil, fmt.Errorf("input_schema has type %v; the Messages API needs \"object\"", typ)
	}
	delete(schema, "type")
	tool := &sdk.ToolParam{
		Name:        t.Name,
		InputSchema: sdk.ToolInputSchemaParam{ExtraFields: schema},
	}
	if t.Description != "" {
		tool.Description = sdk.String(t.Description)
	}
	return tool, nil
}

// message maps one normalized turn.
func (p *Provider) message(t model.Turn) (sdk.MessageParam, error) {
	var blocks []sdk.ContentBlockParamUnion
	if t.Role == model.RoleAssistant {
		if t.Text != "" {
			blocks = append(blocks, sdk.NewTextBlock(t.Text))
		}
		for j, c := range t.ToolCalls {
			args := c.Arguments
			if len(strings.TrimSpace(string(args))) == 0 {
				args = json.RawMessage(`{}`)
			}
			if !isJSONObject(args) {
				return sdk.MessageParam{}, fmt.Errorf("tool call %d (id %s, tool %s): arguments are not a JSON object", j, c.ID, c.Name)
			}
			blocks = append(blocks, sdk.NewToolUseBlock(c.ID, args, c.Name))
		}
		return sdk.NewAssistantMessage(blocks...), nil
	}
	for _, r := range t.ToolResults {
		blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolResult: p.toolResult(r)})
	}
	for _, part := range t.Content {
		if part.Type == "image" {
			if img, ok := p.image(part); ok {
				blocks = append(blocks, sdk.ContentBlockParamUnion{OfImage: img})
				continue
			}
			blocks = append(blocks, sdk.NewTextBlock(p.placeholder(part)))
			continue
		}
		if part.Text != "" {
			blocks = append(blocks, sdk.NewTextBlock(part.Text))
		}
	}
	return sdk.NewUserMessage(blocks...), nil
}

// toolResult maps a result; images become placeholders unless the model
// takes them (RAP RE-2).
func (p *Provider) toolResult(r model.ToolResult) *sdk.ToolResultBlockParam {
	b := &sdk.ToolResultBlockParam{ToolUseID: r.CallID}
	if r.IsError {
		b.IsError = sdk.Bool(true)
	}
	for _, part := range r.Parts() {
		switch {
		case part.Type == "image":
			if img, ok := p.image(part); ok {
				b.Content = append(b.Content, sdk.ToolResultBlockParamContentUnion{OfImage: img})
				continue
			}
			b.Content = append(b.Content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: p.placeholder(part)}})
		case part.Text != "":
			b.Content = append(b.Content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: part.Text}})
		}
	}
	return b
}

// anthropicImageTypes are the media types the Messages API accepts.
var anthropicImageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// image returns the API block for an image part, or false when the image
// must be replaced by a placeholder.
func (p *Provider) image(part model.ContentPart) (*sdk.ImageBlockParam, bool) {
	if !p.images || !anthropicImageTypes[part.MediaType] || part.Data == "" {
		return nil, false
	}
	return &sdk.ImageBlockParam{Source: sdk.ImageBlockParamSourceUnion{OfBase64: &sdk.Base64ImageSourceParam{
		Data:      part.Data,
		MediaType: sdk.Base64ImageSourceMediaType(part.MediaType),
	}}}, true
}

func (p *Provider) placeholder(part model.ContentPart) string {
	if !p.images {
		return model.ImagePlaceholder(part, "this model does not accept images")
	}
	if part.Data == "" {
		return model.ImagePlaceholder(part, "the image has no data")
	}
	return model.ImagePlaceholder(part, "the Messages API accepts only JPEG, PNG, GIF and WebP images")
}

func isJSONObject(raw json.RawMessage) bool {
	// json.Valid and the first byte say the same as decoding into a map
	// would, without building the map (this runs for every tool call of
	// every turn encoded).
	v := bytes.TrimLeft(raw, " \t\r\n")
	return len(v) > 0 && v[0] == '{' && json.Valid(v)
}

// streamError is the API error that an error event of res's stream
// carries, as the SDK's Stream makes it.
func streamError(res *http.Response, data []byte) error {
	aerr := &sdk.Error{
		Request:     res.Request,
		Response:    res,
		StatusCode:  res.StatusCode,
		RequestID:   res.Header.Get("request-id"),
		WorkspaceID: res.Header.Get("anthropic-workspace-id"),
	}
	if aerr.UnmarshalJSON(data) != nil {
		return fmt.Errorf("received error while streaming: %s", data)
	}
	return aerr
}

// describe turns a failed request into an error that says what happened and
// what to do. The SDK error stays in the chain for errors.As.
func (p *Provider) describe(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("anthropic: %s: completion stopped: %w", p.model, errors.Join(ctx.Err(), err))
	}
	var apiErr *sdk.Error
	isAPI := errors.As(err, &apiErr)
	switch {
	case isAPI && apiErr.StatusCode == http.StatusOK:
		// An error event inside a stream that had started well.
		return fmt.Errorf("anthropic: %s: the API failed in the middle of its answer: %s; retry later: %w", p.model, apiMessage(apiErr.RawJSON()), err)
	case !isAPI && strings.Contains(err.Error(), "error while streaming"):
		// The same, when the SDK could not decode the event into an Error.
		return fmt.Errorf("anthropic: %s: the API failed in the middle of its answer; retry later: %w", p.model, err)
	case !isAPI:
		return fmt.Errorf("anthropic: %s: request to %s failed: %w; check the base URL (%s) and the network", p.model, p.baseURL, err, EnvBaseURL)
	}
	msg := apiMessage(apiErr.RawJSON())
	return fmt.Errorf("anthropic: %s: HTTP %d %s: %s; %s: %w",
		p.model, apiErr.StatusCode, http.StatusText(apiErr.StatusCode), msg, hint(apiErr.StatusCode), err)
}

// apiMessage extracts error.message from an API error body.
func apiMessage(body string) string {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(body), &e) != nil || e.Error.Message == "" {
		return "no error message in the response"
	}
	if e.Error.Type != "" {
		return e.Error.Type + ": " + e.Error.Message
	}
	return e.Error.Message
}

func hint(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "check the API key in " + EnvAPIKey
	case status == http.StatusForbidden:
		return "the API key lacks permission for this model or feature"
	case status == http.StatusNotFound:
		return "check the model name and the base URL"
	case status == http.StatusRequestEntityTooLarge:
		return "the conversation is too large: shorten it"
	case status == http.StatusTooManyRequests:
		return "rate limited: retry later"
	case status == 529:
		return "the API is overloaded: retry later"
	case status >= 500:
		return "server error: retry later"
	default:
		return "the request was rejected: fix it before retrying"
	}
}
