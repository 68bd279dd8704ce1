// Package scripted is a model.Provider that plays a script of turns instead
// of calling a language model. It makes runtime tests, demos and benchmarks
// deterministic and free. It is not a real LLM and its Name says so.
//
// A script is a JSON file (see docs/scripted-model.md):
//
//	{"turns": [
//	  {"after_user": "time", "tool_calls": [{"name": "get_time", "arguments": {"timezone": "UTC"}}]},
//	  {"when": {"last_result_contains": "UTC"}, "text": "It is {{last_result}}."},
//	  {"text": "I only know the time.", "repeat": true}
//	]}
//
// Selection is a pure function of the conversation, so a restarted runtime
// continues a script where it was: for each assistant message of the
// history, and then for the reply being made, the model picks the first
// turn (in file order) that is not used up and whose conditions hold for the
// input that preceded it. A turn is used up once picked, unless it has
// "repeat": true.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorap/gorap/model"
)

// MaxScriptBytes bounds a script file.
const MaxScriptBytes = 4 << 20

// Turn is one scripted assistant reply.
type Turn struct {
	// Text is the reply text. "{{last_result}}" and "{{last_user}}" are
	// replaced by the latest tool result text and user text.
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls the reply makes.
	ToolCalls []Call `json:"tool_calls,omitempty"`
	// When holds conditions on the input; all must hold.
	When *When `json:"when,omitempty"`
	// AfterUser is shorthand for When.UserContains.
	AfterUser string `json:"after_user,omitempty"`
	// Repeat keeps the turn available after it is used: a script whose turns
	// all repeat answers instantly without replaying the history (the
	// benchmark mode).
	Repeat bool `json:"repeat,omitempty"`
	// Error, when set, makes the completion fail with this message (to test
	// model failures).
	Error string `json:"error,omitempty"`
}

// Call is a scripted tool call.
type Call struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// When holds the conditions of a turn. Empty conditions hold.
type When struct {
	// UserContains holds when the latest user text contains it.
	UserContains string `json:"user_contains,omitempty"`
	// LastResultContains holds when the latest tool result (text or text
	// content) contains it.
	LastResultContains string `json:"last_result_contains,omitempty"`
	// LastInput is "user" or "tool_result": which kind of input came last.
	LastInput string `json:"last_input,omitempty"`
}

// script is the file format.
type script struct {
	Turns []Turn `json:"turns"`
	// StreamDelay, a Go duration such as "30ms", streams each reply a
	// word at a time with this pause between words, so that a person
	// watching a client sees the reply stream in as from a real model.
	StreamDelay string `json:"stream_delay,omitempty"`
	// ContextWindow, in tokens, is the window the model declares
	// (model.WindowReporter), so that a test can make the runtime bound
	// what it sends as for a small model; 0 declares none.
	ContextWindow int `json:"context_window,omitempty"`
	// ReportUsage makes each completion report usage as a provider does:
	// its request's tokens and its answer's, estimated
	// (model.EstimateTokens), so that clients show usage without a real
	// model.
	ReportUsage bool `json:"report_usage,omitempty"`
}

// maxStreamDelay bounds a script's stream_delay.
const maxStreamDelay = 2 * time.Second

// Model plays a script. It is safe for concurrent use.
type Model struct {
	name   string
	turns  []Turn
	images bool
	calls  atomic.Int64
	allRep bool
	delay  time.Duration // between streamed words; 0 streams at once
	window int           // the declared context window in tokens; 0: none
	usage  bool          // report estimated usage with each completion
}

var (
	_ model.Provider       = (*Model)(nil)
	_ model.WindowReporter = (*Model)(nil)
)

// Load reads a script file.
func Load(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	if st.Size() > MaxScriptBytes {
		return nil, fmt.Errorf("scripted model: %s is %d bytes; a script may have at most %d", path, st.Size(), MaxScriptBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	sc, err := parseScript(data)
	if err != nil {
		return nil, fmt.Errorf("scripted model: %s: %w", path, err)
	}
	m := New(sc.Turns)
	if sc.StreamDelay != "" {
		d, err := time.ParseDuration(sc.StreamDelay)
		if err != nil || d < 0 || d > maxStreamDelay {
			return nil, fmt.Errorf("scripted model: %s: stream_delay %q: want a duration from 0 to %v, such as \"30ms\"", path, sc.StreamDelay, maxStreamDelay)
		}
		m.SetStreamDelay(d)
	}
	m.window = sc.ContextWindow
	m.usage = sc.ReportUsage
	m.name = "scripted:" + filepath.Base(path) + " (scripted test model — not a real LLM)"
	return m, nil
}

// Parse reads a script: an object {"turns": [...]} or a bare array of
// turns. Unknown members are errors, so a typo does not go unnoticed.
func Parse(data []byte) ([]Turn, error) {
	s, err := parseScript(data)
	return s.Turns, err
}

// parseScript reads and checks a script file's whole contents.
func parseScript(data []byte) (script, error) {
	trimmed := strings.TrimSpace(string(data))
	var s script
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var err error
	if strings.HasPrefix(trimmed, "[") {
		err = dec.Decode(&s.Turns)
	} else {
		err = dec.Decode(&s)
	}
	if err != nil {
		return script{}, fmt.Errorf("not a valid script (want {\"turns\": [{\"text\": ..., \"tool_calls\": [...]}]}): %w", err)
	}
	if len(s.Turns) == 0 {
		return script{}, errors.New(`script has no turns; add at least one, such as {"text": "hello", "repeat": true}`)
	}
	if s.ContextWindow < 0 {
		return script{}, fmt.Errorf("context_window: %d; want a number of tokens, such as 8000 (leave it out to declare none)", s.ContextWindow)
	}
	for i, t := range s.Turns {
		if t.Text == "" && len(t.ToolCalls) == 0 && t.Error == "" {
			return script{}, fmt.Errorf("turns[%d]: needs text, tool_calls or error", i)
		}
		for j, c := range t.ToolCalls {
			if c.Name == "" {
				return script{}, fmt.Errorf("turns[%d].tool_calls[%d].name: missing", i, j)
			}
			if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
				return script{}, fmt.Errorf("turns[%d].tool_calls[%d].arguments: not valid JSON", i, j)
			}
		}
		if t.When != nil && t.When.LastInput != "" && t.When.LastInput != "user" && t.When.LastInput != "tool_result" {
			return script{}, fmt.Errorf("turns[%d].when.last_input: %q; want \"user\" or \"tool_result\"", i, t.When.LastInput)
		}
	}
	return s, nil
}

// New returns a model that plays turns.
func New(turns []Turn) *Model {
	m := &Model{name: "scripted:inline (scripted test model — not a real LLM)", turns: turns, allRep: true}
	for _, t := range turns {
		if !t.Repeat {
			m.allRep = false
		}
	}
	return m
}

// SetStreamDelay makes the model stream each reply a word at a time with
// d between words (as a script's "stream_delay" does); 0, the default,
// streams a reply in three deltas at once. Set it before the model is
// used.
func (m *Model) SetStreamDelay(d time.Duration) { m.delay = d }

// Name implements model.Provider.
func (m *Model) Name() string { return m.name }

// ContextWindow implements model.WindowReporter: the script's
// "context_window", or what SetContextWindow set; 0 when neither did.
func (m *Model) ContextWindow() int { return m.window }

// SetContextWindow makes the model declare a context window of tokens (as
// a script's "context_window" does); 0 declares none. Set it before the
// model is used.
func (m *Model) SetContextWindow(tokens int) { m.window = tokens }

// SupportsImages implements model.Provider. It is false unless set with
// SetSupportsImages.
func (m *Model) SupportsImages() bool { return m.images }

// SetSupportsImages sets what SupportsImages reports (to test RAP RE-2).
func (m *Model) SetSupportsImages(v bool) { m.images = v }

// Completions returns how many completions the model ran.
func (m *Model) Completions() int64 { return m.calls.Load() }

// input is what a turn's conditions look at.
type input struct {
	lastUser   string
	lastResult string
	lastKind   string // "user" or "tool_result"
}

// inputOf reads the latest user text and tool result of msgs, scanning
// from the end (a message's text comes after its results).
func inputOf(msgs []model.Message) input {
	var in input
	haveUser, haveResult := false, false
	for i := len(msgs) - 1; i >= 0 && !(haveUser && haveResult); i-- {
		msg := &msgs[i]
		if msg.Role != model.RoleUser {
			continue
		}
		if msg.Text != "" && !haveUser {
			in.lastUser, haveUser = msg.Text, true
			if in.lastKind == "" {
				in.lastKind = "user"
			}
		}
		if n := len(msg.ToolResults); n > 0 && !haveResult {
			in.lastResult, haveResult = msg.ToolResults[n-1].PlainText(), true
			if in.lastKind == "" {
				in.lastKind = "tool_result"
			}
		}
	}
	return in
}

func (t *Turn) matches(in input) bool {
	if t.AfterUser != "" && !strings.Contains(in.lastUser, t.AfterUser) {
		return false
	}
	if t.When == nil {
		return true
	}
	w := t.When
	if w.UserContains != "" && !strings.Contains(in.lastUser, w.UserContains) {
		return false
	}
	if w.LastResultContains != "" && !strings.Contains(in.lastResult, w.LastResultContains) {
		return false
	}
	if w.LastInput != "" && w.LastInput != in.lastKind {
		return false
	}
	return true
}

// pick returns the index of the turn to play, or -1, and marks it used.
func (m *Model) pick(used []bool, in input) int {
	for i := range m.turns {
		if used[i] || !m.turns[i].matches(in) {
			continue
		}
		if !m.turns[i].Repeat {
			used[i] = true
		}
		return i
	}
	return -1
}

// Complete implements model.Provider.
func (m *Model) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.calls.Add(1)
	used := make([]bool, len(m.turns))
	if !m.allRep {
		// Replay the choices made for the assistant messages so far.
		for i, msg := range req.Messages {
			if msg.Role == model.RoleAssistant && !injectedOnly(msg) {
				m.pick(used, inputOf(req.Messages[:i]))
			}
		}
	}
	in := inputOf(req.Messages)
	i := m.pick(used, in)
	if i < 0 {
		text := "(scripted model: no turn of the script matches this point of the conversation)"
		if err := m.stream(ctx, s, text); err != nil {
			return nil, err
		}
		return &model.Response{Text: text, StopReason: "end_turn"}, nil
	}
	t := m.turns[i]
	if t.Error != "" {
		return nil, fmt.Errorf("scripted model: turns[%d]: %s", i, t.Error)
	}
	text := t.Text
	if strings.Contains(text, "{{") {
		text = strings.NewReplacer("{{last_result}}", in.lastResult, "{{last_user}}", in.lastUser).Replace(text)
	}
	if err := m.stream(ctx, s, text); err != nil {
		return nil, err
	}
	resp := &model.Response{Text: text, StopReason: "end_turn"}
	if m.usage {
		resp.Usage = estimatedUsage(req, text)
	}
	n := len(req.Messages)
	id, stack := threadOf(req.System)
	for j, c := range t.ToolCalls {
		args := c.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		if bytes.Contains(args, []byte("{{")) {
			args = json.RawMessage(strings.NewReplacer(`"{{thread_id}}"`, jsonString(id), `"{{thread_stack}}"`, stack).Replace(string(args)))
			args = json.RawMessage(callIDRe.ReplaceAllStringFunc(string(args), func(m string) string {
				return jsonString(lastCallID(req.Messages, callIDRe.FindStringSubmatch(m)[1]))
			}))
		}
		// Ids are unique within a conversation: the history length makes
		// them differ from turn to turn.
		resp.ToolCalls = append(resp.ToolCalls, model.ToolCall{ID: fmt.Sprintf("call_%d_%d_%d", n, i, j), Name: c.Name, Arguments: args})
		resp.StopReason = "tool_use"
	}
	return resp, nil
}

// threadLinePrefix starts the line the runtime adds to the system prompt
// to name the thread (runtime.ThreadLinePrefix).
const threadLinePrefix = "[runtime] You are thread "

// threadOf reads the thread id and stack from the runtime's thread line,
// for the "{{thread_id}}" and "{{thread_stack}}" placeholders.
func threadOf(system string) (id, stack string) {
	i := strings.LastIndex(system, threadLinePrefix)
	if i < 0 {
		return "", "[]"
	}
	rest := system[i+len(threadLinePrefix):]
	id, rest, _ = strings.Cut(rest, ". Your thread stack, root first: ")
	stack, _, _ = strings.Cut(rest, "]")
	var ids []string
	if json.Unmarshal([]byte(stack+"]"), &ids) != nil {
		return id, "[]"
	}
	return id, jsonString(ids)
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// callIDRe matches the "{{call_id:TOOL}}" placeholder of arguments.
var callIDRe = regexp.MustCompile(`"\{\{call_id:([^"{}]+)\}\}"`)

// lastCallID returns the id of the latest call to tool in msgs, or "".
func lastCallID(msgs []model.Message, tool string) string {
	id := ""
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.Name == tool {
				id = c.ID
			}
		}
	}
	return id
}

// InjectedToolName is the runtime's reserved name of the synthetic calls
// that carry subscription events and child reports into a conversation.
// Assistant messages made only of such calls were not written by the
// model, so replay skips them.
const InjectedToolName = "receive_event__injected"

func injectedOnly(msg model.Message) bool {
	if msg.Text != "" || len(msg.ToolCalls) == 0 {
		return false
	}
	for _, c := range msg.ToolCalls {
		if c.Name != InjectedToolName {
			return false
		}
	}
	return true
}

// stream sends text in deltas, splitting at spaces: three at once, or,
// with a stream delay, a word at a time with the delay between words. It
// returns ctx's error when ctx ends while it waits.
func (m *Model) stream(ctx context.Context, s model.Stream, text string) error {
	if s == nil || text == "" {
		return nil
	}
	words := strings.SplitAfter(text, " ")
	per := max(1, (len(words)+2)/3)
	if m.delay > 0 {
		per = 1
	}
	for i := 0; i < len(words); i += per {
		if i > 0 && m.delay > 0 {
			t := time.NewTimer(m.delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		s.TextDelta(strings.Join(words[i:min(i+per, len(words))], ""))
	}
	return nil
}

// estimatedUsage is the usage a provider would report for req and its
// answer text, estimated.
func estimatedUsage(req model.Request, text string) model.Usage {
	in := model.EstimateTokens(req.System)
	for _, t := range req.Tools {
		in += model.EstimateTokens(t.Description) + model.EstimateTokens(string(t.InputSchema))
	}
	for _, msg := range req.Messages {
		in += 4 + model.EstimateTokens(msg.Text)
		for _, c := range msg.ToolCalls {
			in += model.EstimateTokens(string(c.Arguments))
		}
		for _, r := range msg.ToolResults {
			in += model.EstimateTokens(r.Text)
		}
	}
	return model.Usage{InputTokens: int64(in), OutputTokens: int64(max(model.EstimateTokens(text), 1))}
}
