package mcp

import (
	"context"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
)

// fakeModel answers every completion with a fixed text and records the
// last request.
type fakeModel struct{ last model.Request }

func (m *fakeModel) Name() string         { return "fake:echo" }
func (m *fakeModel) SupportsImages() bool { return false }
func (m *fakeModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	m.last = req
	return &model.Response{Text: "hi there", StopReason: "end_turn"}, nil
}

// sampling/createMessage is answered by the bridge's
// model, and the result says that sampling happened.
func TestSamplingWithModel(t *testing.T) {
	m := &fakeModel{}
	f := startHTTP(t, func(o *Options) { o.SamplingModel = m })
	r := f.call(t, "ask_model", map[string]any{})
	if !strings.HasPrefix(r.Text, `model fake:echo said "hi there"`) || !strings.Contains(r.Text, "asked for a model completion (sampling), answered by fake:echo") {
		t.Errorf("result = %q", r.Text)
	}
	if m.last.System != "Be brief." || m.last.MaxTokens != 50 || len(m.last.Messages) != 1 || m.last.Messages[0].Text != "Say hi" || m.last.Messages[0].Role != model.RoleUser {
		t.Errorf("model request = %+v", m.last)
	}
}

// Without a model, sampling is declined with a message
// that says how to enable it.
func TestSamplingWithoutModel(t *testing.T) {
	f := startHTTP(t, nil)
	r := f.call(t, "ask_model", map[string]any{})
	if !strings.HasPrefix(r.Text, "Error: ") || !strings.Contains(r.Text, "--sampling-model") {
		t.Errorf("result = %q", r.Text)
	}
}
