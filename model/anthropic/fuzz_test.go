package anthropic_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/wiretest"
)

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

// FuzzConversation checks that any conversation shape the runtime may
// produce goes out as one the Messages API accepts (the wiretest server
// rejects what the real API rejects), that no text is lost, and that image
// bytes never reach a model without image input (RAP RE-2).
func FuzzConversation(f *testing.F) {
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
	srv := wiretest.NewAnthropic(func(r wiretest.Request) wiretest.Reply {
		mu.Lock()
		last = r.Body
		mu.Unlock()
		return wiretest.Reply{Text: "ok"}
	})
	f.Cleanup(srv.Close)
	no := false
	p, err := anthropic.New(anthropic.Options{APIKey: "k", BaseURL: srv.URL, SupportsImages: &no})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64 {
			data = data[:64]
		}
		msgs, markers := conversationFrom(data)
		if len(markers) == 0 {
			return // nothing to send; covered by TestBadInput
		}
		if _, err := p.Complete(ctx(t), model.Request{Messages: msgs}, nil); err != nil {
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
