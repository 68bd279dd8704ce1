package wiretest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
)

// Harness tells the shared provider tests (TestProvider, FuzzConversation,
// BenchmarkComplete) how to reach one provider over its wire format.
type Harness struct {
	// Start starts a server that speaks the provider's wire format, such as
	// NewAnthropic or NewOpenAI.
	Start func(Script) *Server
	// New returns a provider that sends its requests to srv with a valid
	// API key. images says whether the provider may send images to the
	// model (model.Provider.SupportsImages).
	New func(tb testing.TB, srv *Server, images bool) model.Provider
}

// Recorder is a model.Stream that keeps every text delta. It is safe for
// concurrent use.
type Recorder struct {
	// OnText, when set, is called after each delta is recorded.
	OnText func()

	mu     sync.Mutex
	deltas []string
}

// TextDelta records s and calls OnText.
func (r *Recorder) TextDelta(s string) {
	r.mu.Lock()
	r.deltas = append(r.deltas, s)
	r.mu.Unlock()
	if r.OnText != nil {
		r.OnText()
	}
}

// Deltas returns a copy of the deltas recorded so far, in order.
func (r *Recorder) Deltas() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.deltas...)
}

// testTimeout bounds every completion of the shared tests; it is generous
// so that a busy machine does not fail them.
const testTimeout = 30 * time.Second

func testContext(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	tb.Cleanup(cancel)
	return ctx
}

// TestProvider runs the tests that every model provider must pass, whatever
// its wire format: streamed tool calls, cancellation and failure in the
// middle of a stream, retried server errors, and a redelivered tool result.
// Call it from a provider's own tests:
//
//	func TestConformance(t *testing.T) { wiretest.TestProvider(t, harness) }
func TestProvider(t *testing.T, h Harness) {
	hi := model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}

	t.Run("two tool calls in one turn", func(t *testing.T) {
		srv := h.Start(Replies(Reply{
			Text: "Both.",
			ToolCalls: []model.ToolCall{
				{Name: "a", Arguments: json.RawMessage(`{"x":1}`)},
				{Name: "b", Arguments: json.RawMessage(`{"y":"two"}`)},
			},
			ChunkSize: 2,
		}))
		defer srv.Close()
		resp, err := h.New(t, srv, false).Complete(testContext(t), hi, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) != 2 || resp.Text != "Both." || resp.StopReason != "tool_use" {
			t.Fatalf("resp = %+v; want the text, two tool calls and stop reason tool_use", resp)
		}
		c := resp.ToolCalls
		if c[0].Name != "a" || string(c[0].Arguments) != `{"x":1}` || c[1].Name != "b" || string(c[1].Arguments) != `{"y":"two"}` {
			t.Errorf("ToolCalls = %+v", c)
		}
		if c[0].ID == "" || c[0].ID == c[1].ID {
			t.Errorf("ids %q and %q must be distinct and non-empty", c[0].ID, c[1].ID)
		}
	})

	t.Run("cancel mid-stream", func(t *testing.T) {
		srv := h.Start(Replies(Reply{Text: "first words", Hang: true}))
		defer srv.Close()
		p := h.New(t, srv, false)
		ctx, cancel := context.WithCancel(testContext(t))
		defer cancel()
		rec := &Recorder{OnText: cancel}
		done := make(chan error, 1)
		go func() {
			_, err := p.Complete(ctx, hi, rec)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("error = %v; want one wrapping context.Canceled", err)
			}
		case <-time.After(testTimeout):
			t.Fatal("Complete did not return after its context was cancelled")
		}
		if len(rec.Deltas()) == 0 {
			t.Error("no delta arrived before the cancellation")
		}
	})

	// An error event in the middle of the stream fails the completion: no
	// half answer is returned (RAP RT-1).
	t.Run("error mid-stream", func(t *testing.T) {
		srv := h.Start(Replies(Reply{Text: "partial answer", StreamError: "the model crashed"}))
		defer srv.Close()
		var rec Recorder
		resp, err := h.New(t, srv, false).Complete(testContext(t), hi, &rec)
		if err == nil || resp != nil {
			t.Fatalf("resp=%+v err=%v; want only an error", resp, err)
		}
		if !strings.Contains(err.Error(), "the model crashed") || !strings.Contains(err.Error(), "retry later") {
			t.Errorf("error = %v; want the server's message and advice to retry later", err)
		}
		if len(rec.Deltas()) == 0 {
			t.Error("the deltas before the error should still have streamed")
		}
	})

	t.Run("500 after retries", func(t *testing.T) {
		srv := h.Start(func(Request) Reply {
			return Reply{Status: http.StatusInternalServerError, Error: "boom", Header: http.Header{"Retry-After-Ms": {"1"}}}
		})
		defer srv.Close()
		_, err := h.New(t, srv, false).Complete(testContext(t), hi, nil)
		if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "retry later") {
			t.Errorf("error = %v; want status 500, the server's message and advice to retry later", err)
		}
		if n := len(srv.Requests()); n < 2 {
			t.Errorf("server saw %d requests; 5xx answers are retried", n)
		}
	})

	// RAP RE-6: a result delivered twice reaches the model once.
	t.Run("redelivered result once", func(t *testing.T) {
		srv := h.Start(nil)
		defer srv.Close()
		res := model.ToolResult{CallID: "call_1", Text: "unique-result-text"}
		_, err := h.New(t, srv, false).Complete(testContext(t), model.Request{Messages: []model.Message{
			{Role: model.RoleUser, Text: "go"},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_1", Name: "t", Arguments: json.RawMessage(`{}`)}}},
			{Role: model.RoleUser, ToolResults: []model.ToolResult{res, res}},
			{Role: model.RoleAssistant, Text: "got it"},
			{Role: model.RoleUser, Text: "thanks", ToolResults: []model.ToolResult{res}},
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(srv.Requests()[0].Body), "unique-result-text"); n != 1 {
			t.Errorf("the result appears %d times in the request, want 1", n)
		}
	})
}

// fuzzImage is a 1x1 PNG, base64.
const fuzzImage = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// conversationFrom builds a conversation from fuzz bytes, one message per
// byte: user text, assistant text, a tool call, a result for some earlier
// (or unknown) call, an error result, an image result, or an empty message.
// It returns the markers whose text must reach the model.
func conversationFrom(data []byte) ([]model.Message, []string) {
	var (
		msgs    []model.Message
		calls   []string
		markers []string
	)
	for i, b := range data {
		pick := func() string {
			if len(calls) == 0 || b >= 0xF0 {
				return fmt.Sprintf("ghost%d", i)
			}
			return calls[int(b/7)%len(calls)]
		}
		switch b % 7 {
		case 0:
			m := fmt.Sprintf("user-%d", i)
			markers = append(markers, m)
			msgs = append(msgs, model.Message{Role: model.RoleUser, Text: m})
		case 1:
			m := fmt.Sprintf("assistant-%d", i)
			markers = append(markers, m)
			msgs = append(msgs, model.Message{Role: model.RoleAssistant, Text: m})
		case 2:
			id := fmt.Sprintf("call%d", i)
			calls = append(calls, id)
			msgs = append(msgs, model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: id, Name: "tool", Arguments: []byte(`{"i":1}`)}}})
		case 3, 4:
			m := fmt.Sprintf("result-%d", i)
			markers = append(markers, m)
			msgs = append(msgs, model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: pick(), Text: m, IsError: b%7 == 4}}})
		case 5:
			m := fmt.Sprintf("imageresult-%d", i)
			markers = append(markers, m)
			msgs = append(msgs, model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: pick(), Content: []model.ContentPart{
				{Type: "text", Text: m}, {Type: "image", Data: fuzzImage, MediaType: "image/png"}}}}})
		case 6:
			msgs = append(msgs, model.Message{Role: []model.Role{model.RoleUser, model.RoleAssistant}[i%2]})
		}
	}
	return msgs, markers
}

// maxFuzzMessages bounds the conversations FuzzConversation builds.
const maxFuzzMessages = 64

// FuzzConversation checks that any conversation shape a runtime may produce
// goes out as one the provider's API accepts (the wiretest servers reject
// what the real APIs reject), that no text is lost, and that image bytes
// never reach a model without image input (RAP RE-2). Call it from a
// provider's own fuzz test:
//
//	func FuzzConversation(f *testing.F) { wiretest.FuzzConversation(f, harness) }
func FuzzConversation(f *testing.F, h Harness) {
	for _, seed := range [][]byte{
		{0},
		{0, 2, 3},
		{0, 2, 2, 3, 3},
		{0, 2, 0, 1, 3},
		{2, 5, 6, 0},
		{0, 2, 0, 2, 4, 3, 5, 6, 1, 0xF3},
		{1, 1, 0, 0, 6, 6},
	} {
		f.Add(seed)
	}
	var (
		mu   sync.Mutex
		last []byte
	)
	srv := h.Start(func(r Request) Reply {
		mu.Lock()
		last = r.Body
		mu.Unlock()
		return Reply{Text: "ok"}
	})
	f.Cleanup(srv.Close)
	p := h.New(f, srv, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzMessages {
			data = data[:maxFuzzMessages]
		}
		msgs, markers := conversationFrom(data)
		if len(markers) == 0 {
			return // nothing to send; the providers' bad-input tests cover it
		}
		if _, err := p.Complete(testContext(t), model.Request{Messages: msgs}, nil); err != nil {
			t.Fatalf("conversation %v rejected: %v", data, err)
		}
		mu.Lock()
		body := string(last)
		mu.Unlock()
		for _, m := range markers {
			if !strings.Contains(body, m) {
				t.Errorf("%q was lost from the request", m)
			}
		}
		if strings.Contains(body, fuzzImage) {
			t.Error("image bytes were sent to a model without image input")
		}
	})
}

// BenchmarkComplete measures one streamed completion over loopback: a
// 4 KiB answer in 64-byte deltas plus one tool call, with a 20-message
// history. It bounds a provider's own overhead per model turn. Call it
// from a provider's own benchmark:
//
//	func BenchmarkComplete(b *testing.B) { wiretest.BenchmarkComplete(b, harness) }
func BenchmarkComplete(b *testing.B, h Harness) {
	reply := Reply{
		Text:      strings.Repeat("streamed text ", 4096/14),
		ToolCalls: []model.ToolCall{{ID: "call_b", Name: "tool", Arguments: json.RawMessage(`{"path":"/tmp/x","lines":[1,2,3]}`)}},
		ChunkSize: 64,
	}
	srv := h.Start(func(Request) Reply { return reply })
	defer srv.Close()
	p := h.New(b, srv, true)
	msgs := []model.Message{{Role: model.RoleUser, Text: "start"}}
	for i := range 10 {
		id := fmt.Sprintf("call_%c", 'a'+i)
		msgs = append(msgs,
			model.Message{Role: model.RoleAssistant, Text: "calling", ToolCalls: []model.ToolCall{{ID: id, Name: "tool", Arguments: json.RawMessage(`{}`)}}},
			model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: id, Text: strings.Repeat("result ", 50)}}})
	}
	req := model.Request{Messages: msgs, Tools: []model.ToolSpec{{Name: "tool", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := p.Complete(ctx, req, nil)
		if err != nil || len(resp.ToolCalls) != 1 {
			b.Fatalf("resp=%v err=%v", resp, err)
		}
	}
}

// Conversation builds a conversation from arbitrary bytes, one message per
// byte, of every shape a runtime may send (user and assistant text, tool
// calls, results in time, late, unknown, repeated, with errors or images,
// empty messages): the random histories of the providers' wire-cache
// tests.
func Conversation(data []byte) []model.Message {
	msgs, _ := conversationFrom(data)
	return msgs
}

// RandomConversation is Conversation of 8 to 55 bytes drawn from r.
func RandomConversation(r *rand.Rand) []model.Message {
	data := make([]byte, 8+r.IntN(48))
	for i := range data {
		data[i] = byte(r.IntN(256))
	}
	return Conversation(data)
}
