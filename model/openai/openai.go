// Package openai runs completions against the OpenAI Chat Completions API
// with the official Go SDK, and against the servers that speak the same
// protocol: Ollama, vLLM, llama.cpp's llama-server and others. It implements
// model.Provider: the conversation is mapped to system, user, assistant
// (with tool_calls) and tool messages, the answer is streamed, and tool
// calls are assembled from their chunks by index.
//
// The API key comes from Options.APIKey or OPENAI_API_KEY; the base URL
// from Options.BaseURL, OPENAI_BASE_URL or the public endpoint. A key is
// required only for the public endpoint: local servers need none.
//
// Images in tool results: a tool message holds text only, so each image is
// replaced in it by a short note and, when the model accepts images, the
// images follow in one user message placed right after the tool messages.
// When the model does not accept images each becomes a text placeholder and
// no image bytes are sent (RAP RE-2).
package openai

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/gorap/gorap/model"
)

// Defaults used when Options leaves a field empty.
const (
	DefaultModel     = "gpt-4o"
	DefaultMaxTokens = 4096
	DefaultBaseURL   = "https://api.openai.com/v1"
)

// Environment variables New reads when Options leaves the field empty.
const (
	EnvAPIKey  = "OPENAI_API_KEY"
	EnvBaseURL = "OPENAI_BASE_URL"
)

// maxOutputBytes bounds the text and tool arguments one completion may
// accumulate, so a misbehaving server cannot exhaust memory.
const maxOutputBytes = 16 << 20

// maxToolCalls bounds the tool calls of one completion.
const maxToolCalls = 128

// Options configure a Provider. Every field is optional, except that the
// public endpoint needs an API key.
type Options struct {
	// APIKey authenticates requests; empty means $OPENAI_API_KEY. It may
	// stay empty when the base URL is not the public endpoint.
	APIKey string
	// BaseURL is the API root including /v1, such as
	// "http://localhost:11434/v1" for Ollama; empty means
	// $OPENAI_BASE_URL, then DefaultBaseURL.
	BaseURL string
	// Model is the model id, such as "gpt-4o" or "llama3.1"; empty means
	// DefaultModel.
	Model string
	// MaxTokens caps each completion when the request sets no limit;
	// zero means DefaultMaxTokens.
	MaxTokens int
	// HTTPClient sends the requests; nil means model.DefaultHTTPClient.
	HTTPClient *http.Client
	// SupportsImages overrides whether tool-result images are sent to the
	// model. Nil means true for OpenAI's own vision models (gpt-4o,
	// gpt-4.1, gpt-4-turbo, gpt-5, o3, o4 families) on the public
	// endpoint, false otherwise.
	SupportsImages *bool
}

// Provider is a model.Provider backed by a Chat Completions endpoint. It is
// safe for concurrent use.
type Provider struct {
	key       string // masked in every error
	model     string
	maxTokens int
	images    bool
	baseURL   string
	public    bool // the public OpenAI endpoint: max_completion_tokens
	client    sdk.Client
	// leaseBodies is whether request bodies are built in reused buffers
	// (model.BodyLease): only over net/http's own Transport, whose
	// httptrace hooks tell when a body has been written.
	leaseBodies bool
	tail        atomic.Pointer[encodedTail] // the last request tail encoded (wire.go)
}

var _ model.Provider = (*Provider)(nil)

// visionFamilies are OpenAI model id prefixes that accept image input.
var visionFamilies = []string{"gpt-4o", "gpt-4.1", "gpt-4-turbo", "gpt-5", "o3", "o4"}

// New returns a Provider configured by the options and the environment;
// nil options take every default (the API key and base URL then come from
// $OPENAI_API_KEY and $OPENAI_BASE_URL). New does not change the caller's
// Options. It fails when the public endpoint is used without an API key or
// the base URL is not an http(s) URL.
func New(o *Options) (*Provider, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	key := opts.APIKey
	if key == "" {
		key = os.Getenv(EnvAPIKey)
	}
	base := opts.BaseURL
	if base == "" {
		base = os.Getenv(EnvBaseURL)
	}
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q is not an http(s) URL: check %s or Options.BaseURL (for Ollama: http://localhost:11434/v1)", base, EnvBaseURL)
	}
	public := u.Host == "api.openai.com"
	if key == "" && public {
		return nil, fmt.Errorf("openai: no API key for %s: set %s (or Options.APIKey), or set %s to a local server such as Ollama", base, EnvAPIKey, EnvBaseURL)
	}
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("openai: MaxTokens is %d: use a positive number, or 0 for the default %d", opts.MaxTokens, DefaultMaxTokens)
	}
	p := &Provider{key: key, model: opts.Model, maxTokens: opts.MaxTokens, baseURL: base, public: public}
	if p.model == "" {
		p.model = DefaultModel
	}
	if p.maxTokens == 0 {
		p.maxTokens = DefaultMaxTokens
	}
	if opts.SupportsImages != nil {
		p.images = *opts.SupportsImages
	} else if public {
		for _, f := range visionFamilies {
			if strings.HasPrefix(p.model, f) {
				p.images = true
			}
		}
	}
	// No admin key: the SDK reads OPENAI_ADMIN_KEY and its generic Post,
	// which Complete uses, would send it where no API key is set (its
	// chat methods send only the API key).
	ropts := []option.RequestOption{option.WithBaseURL(base), option.WithAdminAPIKey(""), option.WithAPIKey(key)}
	hc := opts.HTTPClient
	if hc == nil {
		hc = model.DefaultHTTPClient() // keeps connections for concurrent completions
	}
	p.leaseBodies = model.CanLeaseBodies(hc)
	ropts = append(ropts, option.WithHTTPClient(hc))
	p.client = sdk.NewClient(ropts...)
	return p, nil
}

// Name reports "openai:" followed by the model id.
func (p *Provider) Name() string { return "openai:" + p.model }

// SupportsImages reports whether tool-result images reach the model; when
// false each image is replaced by a text placeholder (RAP RE-2).
func (p *Provider) SupportsImages() bool { return p.images }

// Complete streams one completion. Text deltas go to s (which may be nil)
// as they arrive; the returned Response holds the whole assistant turn.
// StopReason uses the vocabulary of the other providers: "end_turn" (the
// API's "stop"), "tool_use" ("tool_calls"), "max_tokens" ("length"); other
// finish reasons pass through unchanged.
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
	body, berr := p.body(lease.Buffer(), req)
	if berr != nil {
		return nil, berr
	}
	lease.Keep(body) // the buffer as grown
	// The body is encoded here, "stream":true included (see wire.go); the
	// SDK sends it, retries and splits the event stream into events
	// (ssestream.Decoder). Not through Chat.Completions.NewStreaming, which
	// would add "stream" to the body with sjson (a parse and a copy of the
	// whole history) and decode each chunk into the SDK's full type; and
	// the chunks are decoded here (chunkStream, chunk.go), without
	// ssestream.Stream's json.Unmarshal.
	var raw *http.Response
	err = p.client.Post(ctx, "chat/completions", nil, &raw, option.WithRequestBody("application/json", body))
	events := ssestream.NewDecoder(raw)
	if events != nil {
		defer events.Close()
	}
	if err != nil {
		return nil, p.describe(ctx, err)
	}

	chunks := chunkStream{events: events}
	acc := accumulator{tools: req.Tools, history: req.Messages}
	var ch chunk
	for chunks.next(&ch) {
		model.Activity(s)
		if err := acc.add(ch, s); err != nil {
			return nil, fmt.Errorf("openai: %s: %w", p.model, err)
		}
	}
	if err := chunks.err; err != nil {
		return nil, p.describe(ctx, err)
	}
	if ctx.Err() != nil {
		return nil, p.describe(ctx, ctx.Err())
	}
	if acc.finish == "" {
		return nil, fmt.Errorf("openai: %s: the response stream ended without a finish_reason (connection lost?); retry the request", p.model)
	}
	return acc.response(p.model)
}

// params builds the Chat Completions request for req from scratch, with
// the SDK's types: the reference that body, which sends the same bytes, is
// tested against.
func (p *Provider) params(req model.Request) (sdk.ChatCompletionNewParams, error) {
	limit := req.MaxTokens
	if limit <= 0 {
		limit = p.maxTokens
	}
	params := sdk.ChatCompletionNewParams{Model: shared.ChatModel(p.model), StreamOptions: streamOptions}
	// The public API wants max_completion_tokens (its reasoning models
	// reject max_tokens); local servers widely know only max_tokens.
	if p.public {
		params.MaxCompletionTokens = sdk.Int(int64(limit))
	} else {
		params.MaxTokens = sdk.Int(int64(limit))
	}
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(req.System))
	}
	for i, t := range req.Tools {
		fn, err := functionParam(t)
		if err != nil {
			return params, fmt.Errorf("openai: tools[%d] (%s): %w", i, t.Name, err)
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	turns, err := model.Normalize(req.Messages)
	if err != nil {
		return params, fmt.Errorf("openai: %w", err)
	}
	if len(turns) == 0 {
		return params, errors.New("openai: the request has no messages with content: add a user message")
	}
	for i, t := range turns {
		msgs, err := p.messages(t)
		if err != nil {
			return params, fmt.Errorf("openai: conversation turn %d (%s): %w", i, t.Role, err)
		}
		params.Messages = append(params.Messages, msgs...)
	}
	return params, nil
}

// streamOptions asks for the usage chunk at the end of the stream, which
// counts the prompt tokens served from the automatic prompt cache.
var streamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}

// functionParam maps a tool spec; the schema must be a JSON object.
func functionParam(t model.ToolSpec) (shared.FunctionDefinitionParam, error) {
	fn := shared.FunctionDefinitionParam{Name: wireName(t.Name)}
	if t.Description != "" {
		fn.Description = sdk.String(t.Description)
	}
	schema := map[string]any{}
	if len(t.InputSchema) > 0 {
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil || schema == nil {
			return fn, fmt.Errorf("input_schema is not a JSON object: fix the tool's inputSchema")
		}
	}
	if _, ok := schema["type"]; !ok {
		schema["type"] = "object"
	}
	fn.Parameters = shared.FunctionParameters(schema)
	return fn, nil
}

// messages maps one normalized turn to one or more API messages: a user
// turn with tool results becomes one tool message per result, then a user
// message for any other content and for images.
func (p *Provider) messages(t model.Turn) ([]sdk.ChatCompletionMessageParamUnion, error) {
	if t.Role == model.RoleAssistant {
		var a sdk.ChatCompletionAssistantMessageParam
		if t.Text != "" {
			a.Content.OfString = sdk.String(t.Text)
		}
		for j, c := range t.ToolCalls {
			args := strings.TrimSpace(string(c.Arguments))
			if args == "" {
				args = "{}"
			}
			if !json.Valid([]byte(args)) {
				return nil, fmt.Errorf("tool call %d (id %s, tool %s): arguments are not valid JSON", j, c.ID, c.Name)
			}
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID:       c.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: wireName(c.Name), Arguments: args},
				},
			})
		}
		return []sdk.ChatCompletionMessageParamUnion{{OfAssistant: &a}}, nil
	}

	var (
		out    []sdk.ChatCompletionMessageParamUnion
		images []sdk.ChatCompletionContentPartUnionParam
	)
	for _, r := range t.ToolResults {
		var texts []string
		if r.IsError {
			texts = append(texts, "Error (reported by the tool):")
		}
		for _, part := range r.Parts() {
			switch {
			case part.Type == "image" && p.attachable(part):
				n := countImages(images) + 1
				images = append(images,
					sdk.TextContentPart(fmt.Sprintf("Image %d, from the result of tool call %s:", n, r.CallID)),
					p.imagePart(part))
				texts = append(texts, fmt.Sprintf("[image %d: attached in the next user message]", n))
			case part.Type == "image":
				texts = append(texts, p.placeholder(part))
			case part.Text != "":
				texts = append(texts, part.Text)
			}
		}
		text := strings.Join(texts, "\n")
		if text == "" {
			text = "(the tool returned no output)"
		}
		out = append(out, sdk.ToolMessage(text, r.CallID))
	}
	var parts []sdk.ChatCompletionContentPartUnionParam
	for _, part := range t.Content {
		switch {
		case part.Type == "image" && p.attachable(part):
			parts = append(parts, p.imagePart(part))
		case part.Type == "image":
			parts = append(parts, sdk.TextContentPart(p.placeholder(part)))
		case part.Text != "":
			parts = append(parts, sdk.TextContentPart(part.Text))
		}
	}
	parts = append(images, parts...)
	switch {
	case len(parts) == 0:
	case countImages(parts) == 0:
		// Plain string content is what every compatible server accepts.
		var texts []string
		for _, part := range parts {
			texts = append(texts, part.OfText.Text)
		}
		out = append(out, sdk.UserMessage(strings.Join(texts, "\n\n")))
	default:
		out = append(out, sdk.UserMessage(parts))
	}
	return out, nil
}

func countImages(parts []sdk.ChatCompletionContentPartUnionParam) int {
	n := 0
	for _, p := range parts {
		if p.OfImageURL != nil {
			n++
		}
	}
	return n
}

// attachable reports whether an image part may be sent to the model.
func (p *Provider) attachable(part model.ContentPart) bool {
	return p.images && part.Data != "" && strings.HasPrefix(part.MediaType, "image/")
}

func (p *Provider) imagePart(part model.ContentPart) sdk.ChatCompletionContentPartUnionParam {
	return sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{
		URL: "data:" + part.MediaType + ";base64," + part.Data,
	})
}

func (p *Provider) placeholder(part model.ContentPart) string {
	if !p.images {
		return model.ImagePlaceholder(part, "this model does not accept images")
	}
	return model.ImagePlaceholder(part, "the image has no data or no image media type")
}

// describe turns a failed request into an error that says what happened
// and what to do. The SDK error stays in the chain for errors.As.
func (p *Provider) describe(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("openai: %s: completion stopped: %w", p.model, errors.Join(ctx.Err(), err))
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return fmt.Errorf("openai: %s: the server failed in the middle of its answer: %s; retry later: %w", p.model, streamMessage(streamErr), err)
	}
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("openai: %s: request to %s failed: %w; check the base URL (%s) and that the server is running", p.model, p.baseURL, err, EnvBaseURL)
	}
	msg := apiErr.Message
	if msg == "" {
		msg = "no error message in the response"
	}
	return fmt.Errorf("openai: %s: HTTP %d %s: %s; %s: %w",
		p.model, apiErr.StatusCode, http.StatusText(apiErr.StatusCode), msg, hint(apiErr.StatusCode), err)
}

func hint(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "check the API key in " + EnvAPIKey
	case status == http.StatusForbidden:
		return "the API key lacks permission for this model"
	case status == http.StatusNotFound:
		return "check the model name and the base URL (it usually ends in /v1)"
	case status == http.StatusRequestEntityTooLarge:
		return "the conversation is too large: shorten it"
	case status == http.StatusTooManyRequests:
		return "rate limited or out of quota: retry later"
	case status >= 500:
		return "server error: retry later"
	default:
		return "the request was rejected: fix it before retrying"
	}
}

// streamMessage extracts error.message from a stream's error event.
func streamMessage(e *ssestream.StreamError) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(e.Event.Data, &body) == nil && body.Error.Message != "" {
		return body.Error.Message
	}
	return e.Message
}

// maxNameLen is the longest function name the API accepts; RAP allows
// tool names up to 128 characters.
const maxNameLen = 64

// wireName is the function name sent for a tool name. Names the API
// accepts (ASCII letters, digits, '_' and '-', at most 64) are sent as they
// are; others are sanitized and, if too long, shortened with a hash suffix
// that keeps them unique. The mapping is deterministic, so the names in the
// history match those of the tools.
func wireName(name string) string {
	if isWireName(name) {
		return name
	}
	b := []byte(name)
	for i, c := range b {
		if !wireNameByte(c) {
			b[i] = '_'
		}
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "_" + hex.EncodeToString(sum[:4])
	if len(b) > maxNameLen-len(suffix) {
		b = b[:maxNameLen-len(suffix)]
	}
	return string(b) + suffix
}

// toolName returns the tool name that wire, a function name the server
// sent, stands for: the name of the last call in history, else of the last
// tool, that wireName maps to wire; or wire itself when none does. These
// are the names a map from wire names filled with the tools, then the
// calls, would hold, but looked up only for the calls a completion returns
// instead of built for every completion.
func toolName(tools []model.ToolSpec, history []model.Message, wire string) string {
	for i := len(history) - 1; i >= 0; i-- {
		calls := history[i].ToolCalls
		for j := len(calls) - 1; j >= 0; j-- {
			if n := calls[j].Name; wireNameIs(n, wire) {
				return n
			}
		}
	}
	for i := len(tools) - 1; i >= 0; i-- {
		if n := tools[i].Name; wireNameIs(n, wire) {
			return n
		}
	}
	return wire
}

// wireNameIs reports whether wireName(name) == wire, hashing name only when
// it has to be sanitized and wire has the length its wire name would.
func wireNameIs(name, wire string) bool {
	if isWireName(name) {
		return name == wire // its own wire name
	}
	// A sanitized name ends in '_' and 8 hex digits, after at most
	// maxNameLen-9 bytes of the name.
	return len(wire) == min(len(name), maxNameLen-9)+9 && wireName(name) == wire
}

// isWireName reports whether the API accepts name as a function name, so
// that wireName leaves it as it is.
func isWireName(name string) bool {
	if len(name) == 0 || len(name) > maxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !wireNameByte(name[i]) {
			return false
		}
	}
	return true
}

// wireNameByte reports whether c may appear in a function name.
func wireNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// newCallID makes an id for a tool call the server sent without one, as
// some local servers do.
func newCallID() string { return "call_" + strings.ReplaceAll(uuid.NewString(), "-", "") }
