package runtime

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
)

// usageModel is the scripted model reporting the same usage for every
// completion, as a real provider reports its own.
type usageModel struct {
	model.Provider
	u model.Usage
}

func (m *usageModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	resp, err := m.Provider.Complete(ctx, req, s)
	if resp != nil {
		resp.Usage = m.u
	}
	return resp, err
}

// Every completion's usage is saved with its turn: a thread's totals and
// its session's (a child thread's included) are in its state, survive a
// restart, and travel with the session in an archive.
func TestUsageIsSavedWithEachTurn(t *testing.T) {
	u := model.Usage{InputTokens: 100, CachedInputTokens: 40, CacheWriteInputTokens: 10, OutputTokens: 7}
	m := &usageModel{Provider: scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}}), u: u}
	e := newEnv(t, envOptions{model: m})
	th := e.newThread()
	e.post(th, "one")
	e.idle(th)
	e.post(th, "two")
	e.idle(th)
	ctx := context.Background()
	check := func(when string, wantThread, wantSession int64) {
		t.Helper()
		info, err := e.rt.ThreadInfo(ctx, th)
		if err != nil {
			t.Fatal(err)
		}
		if info.Usage == nil || info.Usage.InputTokens != 100*wantThread || info.Usage.OutputTokens != 7*wantThread ||
			info.Usage.CachedInputTokens != 40*wantThread || info.Usage.CacheWriteInputTokens != 10*wantThread ||
			info.Usage.UncachedInputTokens != 60*wantThread {
			t.Fatalf("%s: the thread's usage = %+v; want %d completions' worth", when, info.Usage, wantThread)
		}
		if info.SessionUsage == nil || info.SessionUsage.InputTokens != 100*wantSession {
			t.Fatalf("%s: the session's usage = %+v; want %d completions' worth", when, info.SessionUsage, wantSession)
		}
	}
	check("after two turns", 2, 2)
	// A child thread's completion counts for the session, not the root.
	e.stop()
	e.offline(func(tx store.Tx) error {
		last, err := tx.LastSeq(th)
		if err != nil {
			return err
		}
		if err := tx.CreateThread(store.Thread{ID: th + "-c", ParentID: th, InheritSeq: last}); err != nil {
			return err
		}
		_, err = tx.AppendMessages(th+"-c", []store.Message{{Role: store.RoleAssistant, Text: "child", Usage: &store.Usage{InputTokens: 100, OutputTokens: 7, Model: "x"}}})
		return err
	})
	e.start()
	check("after a restart, with a child thread", 2, 3)
	h := e.history(th)
	if h[len(h)-1].Usage == nil || h[len(h)-1].Usage.Model != m.Name() {
		t.Fatalf("the last turn's saved usage = %+v; want it with the model's name %q", h[len(h)-1].Usage, m.Name())
	}
	var buf bytes.Buffer
	if _, err := e.rt.ExportSessions(ctx, &buf, []string{th}); err != nil {
		t.Fatal(err)
	}
	if strings.Count(buf.String(), `"usage":{"input_tokens":100`) != 3 {
		t.Fatalf("the archive carries %d turns' usage; want 3", strings.Count(buf.String(), `"usage":{"input_tokens":100`))
	}
}
