package anthropic_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/wiretest"
)

// BenchmarkComplete measures one streamed completion over loopback: a
// 4 KiB answer in 64-byte deltas plus one tool call, with a 20-message
// history. It bounds the provider's own overhead per model turn.
func BenchmarkComplete(b *testing.B) {
	reply := wiretest.Reply{
		Text:      strings.Repeat("streamed text ", 4096/14),
		ToolCalls: []model.ToolCall{{ID: "toolu_b", Name: "tool", Arguments: json.RawMessage(`{"path":"/tmp/x","lines":[1,2,3]}`)}},
		ChunkSize: 64,
	}
	srv := wiretest.NewAnthropic(func(wiretest.Request) wiretest.Reply { return reply })
	defer srv.Close()
	p, err := anthropic.New(anthropic.Options{APIKey: "k", BaseURL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	var msgs []model.Message
	for i := 0; i < 10; i++ {
		id := "toolu_" + string(rune('a'+i))
		msgs = append(msgs,
			model.Message{Role: model.RoleAssistant, Text: "calling", ToolCalls: []model.ToolCall{{ID: id, Name: "tool", Arguments: json.RawMessage(`{}`)}}},
			model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: id, Text: strings.Repeat("result ", 50)}}})
	}
	msgs = append([]model.Message{{Role: model.RoleUser, Text: "start"}}, msgs...)
	req := model.Request{Messages: msgs, Tools: []model.ToolSpec{{Name: "tool", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := p.Complete(ctx, req, nil)
		if err != nil || len(resp.ToolCalls) != 1 {
			b.Fatalf("resp=%v err=%v", resp, err)
		}
	}
}
