package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/openai"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/model/wiretest"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// serverBlock is a compaction block as Anthropic's API could stream it,
// with bytes any re-encoding would change.
const serverBlock = `{"type":"compaction", "content":"SERVER-SUMMARY: the user said hello <&>.","encrypted_content":"RU5DUllQVEVE",` +
	`"signature":"c2lnbmF0dXJl", "tool_changes":[] }`

// sentBlock is serverBlock as a later request carries it: its bytes, with
// a cache breakpoint as its last member.
var sentBlock = serverBlock[:len(serverBlock)-1] + `,"cache_control":{"type":"ephemeral"}}`

// Through the Anthropic provider and a model that has server-side
// compaction, under --compaction auto (SQLite) and provider
// (PostgreSQL): every request carries the compaction beta header and a
// compact_20260112 edit at the runtime's share of the window; the block a
// response returns is stored with its turn, as a compaction up to the
// request's last message, shown in the history and announced; the next
// request, and the first after a restart, send the block back byte for
// byte, first, followed by the messages after it only; and gorap never
// summarises on its own.
func TestProviderCompactionOnTheWire(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     CompactionMode
		postgres bool
	}{{"auto-sqlite", CompactionAuto, false}, {"provider-postgres", CompactionProvider, true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := wiretest.NewAnthropic(func(req wiretest.Request) wiretest.Reply {
				last := req.Messages[len(req.Messages)-1]
				if last.Text == "hello" {
					return wiretest.Reply{Compaction: &wiretest.Compaction{Block: json.RawMessage(serverBlock)}, Text: "first answer"}
				}
				return wiretest.Reply{Text: "answer to " + last.Text}
			})
			defer srv.Close()
			p, err := anthropic.New(&anthropic.Options{APIKey: "k", BaseURL: srv.URL, Model: "claude-sonnet-4-6"})
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, envOptions{model: p, postgres: tc.postgres, tweak: func(c *Config) {
				c.Compaction = CompactionConfig{Mode: tc.mode}
			}})
			if who, at := e.rt.CompactionInUse(); who != "provider" || at != 150_000 {
				t.Fatalf("CompactionInUse() = %s, %d; want provider at 150000 (75 %% of the model's 200000)", who, at)
			}
			th := e.newThread()
			events, cancel := e.rt.Subscribe(th)
			defer cancel()
			e.post(th, "hello")
			e.idle(th)

			first := srv.Requests()[0]
			checkCompactionAsked(t, first)
			if len(first.CompactionBlocks) != 0 {
				t.Fatalf("the first request carries compaction blocks: %q", first.CompactionBlocks)
			}
			// Stored with the turn: up to the user's message, the last the
			// request carried, with the block as it arrived.
			comps := storedCompactions(t, e, th)
			if len(comps) != 1 {
				t.Fatalf("%d compactions stored; want 1", len(comps))
			}
			c := comps[0]
			if c.UpToSeq != 1 || c.Messages != 1 || c.Summary != "SERVER-SUMMARY: the user said hello <&>." || string(c.Block) != serverBlock {
				t.Fatalf("stored compaction %+v (block %s); want up to 1, the summary and the block byte for byte", c, c.Block)
			}
			if c.Usage == nil || c.Usage.InputTokens <= 0 || c.Usage.Model != "anthropic:claude-sonnet-4-6" {
				t.Errorf("stored compaction usage %+v; want what the API reported the compaction cost", c.Usage)
			}
			if h := e.history(th); len(h) != 2 || h[1].Text != "first answer" {
				t.Fatalf("history:\n%s", dump(h))
			}
			var ev api.Compaction
			if err := json.Unmarshal(waitEvent(t, events, EventCompacted).Data, &ev); err != nil || ev.UpToSeq != 1 || ev.Summary != c.Summary {
				t.Errorf("compacted event %+v, %v; want the stored compaction", ev, err)
			}
			checkHistoryShowsCompaction(t, e, th, c.Summary)

			e.post(th, "second")
			e.idle(th)
			checkSendsBlockBack(t, srv.Requests()[1], []string{"first answer", "second"})

			e.restart()
			e.post(th, "third")
			e.idle(th)
			reqs := srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d model requests; want 3", len(reqs))
			}
			checkSendsBlockBack(t, reqs[2], []string{"first answer", "second", "answer to second", "third"})
			// The prefix up to the block, written to the prompt cache by the
			// second request, is read from it by the third.
			for _, bp := range reqs[1].Breakpoints {
				if bp.Where == "messages[0].content[0]" && reqs[2].CacheReadBytes < bp.PrefixBytes {
					t.Errorf("the third request read %d bytes from the prompt cache; want at least the %d up to the block", reqs[2].CacheReadBytes, bp.PrefixBytes)
				}
			}
			for _, r := range e.model.requests() {
				if r.System == compactInstructions {
					t.Errorf("gorap asked the model for a summary of its own")
				}
			}
		})
	}
}

// checkCompactionAsked fails unless req asks for server-side compaction
// at 150000 input tokens.
func checkCompactionAsked(t *testing.T, req wiretest.Request) {
	t.Helper()
	if !strings.Contains(strings.Join(req.Header.Values("anthropic-beta"), ","), "compact-2026-01-12") {
		t.Errorf("anthropic-beta headers %q; want compact-2026-01-12", req.Header.Values("anthropic-beta"))
	}
	var cm struct {
		Edits []struct {
			Type    string `json:"type"`
			Trigger struct {
				Type  string `json:"type"`
				Value int    `json:"value"`
			} `json:"trigger"`
		} `json:"edits"`
	}
	if err := json.Unmarshal(req.ContextManagement, &cm); err != nil || len(cm.Edits) != 1 || cm.Edits[0].Type != "compact_20260112" ||
		cm.Edits[0].Trigger.Type != "input_tokens" || cm.Edits[0].Trigger.Value != 150_000 {
		t.Errorf("context_management %s (%v); want one compact_20260112 edit at 150000 input_tokens", req.ContextManagement, err)
	}
}

// checkSendsBlockBack fails unless req asks for compaction, carries the
// stored block byte for byte as its first block, and then exactly the
// texts of the messages after it.
func checkSendsBlockBack(t *testing.T, req wiretest.Request, after []string) {
	t.Helper()
	checkCompactionAsked(t, req)
	if len(req.CompactionBlocks) != 1 || string(req.CompactionBlocks[0]) != sentBlock {
		t.Fatalf("compaction blocks %q; want the stored one byte for byte, with its breakpoint: %s", req.CompactionBlocks, sentBlock)
	}
	at := bytes.Index(req.Body, []byte(`"messages":[{"content":[`+sentBlock+`],"role":"assistant"}`))
	if at < 0 {
		t.Fatalf("the block is not the first of the messages:\n%s", req.Body)
	}
	var texts []string
	for _, m := range req.Messages {
		if m.Text != "" {
			texts = append(texts, m.Text)
		}
	}
	if strings.Join(texts, "|") != strings.Join(after, "|") {
		t.Errorf("the messages after the block read %q; want %q (nothing it covers)", texts, after)
	}
	if bytes.Contains(req.Body, []byte(`"hello"`)) {
		t.Errorf("the request still carries the message the block covers")
	}
	var onBlock bool
	for _, bp := range req.Breakpoints {
		onBlock = onBlock || bp.Where == "messages[0].content[0]"
	}
	if !onBlock || len(req.Breakpoints) > 4 {
		t.Errorf("breakpoints %+v; want one on the compaction block, and at most the API's 4", req.Breakpoints)
	}
}

func storedCompactions(t *testing.T, e *env, th string) []store.Compaction {
	t.Helper()
	var out []store.Compaction
	err := e.rt.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		out, err = tx.ThreadCompactions(th)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkHistoryShowsCompaction fails unless GET /v1/threads/{id}/messages
// lists one compaction with summary, as it lists gorap's own.
func checkHistoryShowsCompaction(t *testing.T, e *env, th, summary string) {
	t.Helper()
	resp, err := http.Get(e.srv.URL + "/v1/threads/" + th + "/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h api.HistoryResponse
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if len(h.Compactions) != 1 || h.Compactions[0].Summary != summary || h.Compactions[0].UpToSeq != 1 || h.Compactions[0].Messages != 1 {
		t.Errorf("history compactions %+v; want the provider's, up to message 1", h.Compactions)
	}
}

// Under --compaction auto, a provider without a compaction of its own
// (OpenAI's) gets gorap's: a thread that outgrows the window is
// summarised by its model, and the requests after carry the summary and
// no compaction request.
func TestAutoCompactionIsGorapsOnOpenAI(t *testing.T) {
	srv := wiretest.NewOpenAI(func(req wiretest.Request) wiretest.Reply {
		if last := req.Messages[len(req.Messages)-1]; strings.Contains(last.Text, "Summarize the conversation above") {
			return wiretest.Reply{Text: "GORAP-SUMMARY of the earlier messages"}
		}
		return wiretest.Reply{Text: "ok " + strings.Repeat("y", 300)}
	})
	defer srv.Close()
	p, err := openai.New(&openai.Options{APIKey: "k", BaseURL: srv.URL + "/v1", Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{model: p, tweak: func(c *Config) {
		c.Compaction = CompactionConfig{Mode: CompactionAuto, Window: 3000}
	}})
	if who, _ := e.rt.CompactionInUse(); who != "gorap" {
		t.Fatalf("CompactionInUse() = %s; want gorap for OpenAI", who)
	}
	th := e.newThread()
	for i := range 20 {
		e.post(th, strings.Repeat("x", 300)+" message "+string(rune('a'+i)))
		e.idle(th)
	}
	comps := storedCompactions(t, e, th)
	if len(comps) == 0 {
		t.Fatal("the thread was never compacted")
	}
	for _, c := range comps {
		if len(c.Block) != 0 || !strings.Contains(c.Summary, "GORAP-SUMMARY") {
			t.Errorf("compaction %+v; want gorap's, with the model's summary and no block", c)
		}
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	if !bytes.Contains(last.Body, []byte("GORAP-SUMMARY")) {
		t.Errorf("the last request lacks the summary:\n%s", last.Body)
	}
	for _, r := range reqs {
		if bytes.Contains(r.Body, []byte("context_management")) || r.Header.Get("anthropic-beta") != "" {
			t.Fatalf("a request to OpenAI asks for a provider compaction:\n%s", r.Body)
		}
	}
}

// --compaction provider with a model that has no compaction of its own is
// refused at start, saying why and what to use instead; auto then falls
// back to gorap's. So is provider when the window's share is below the
// least trigger the API takes.
func TestProviderCompactionRefused(t *testing.T) {
	srv := wiretest.NewAnthropic(nil)
	defer srv.Close()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "rap.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	newRuntime := func(p model.Provider, cc CompactionConfig, window int) (*Runtime, error) {
		return New(&Config{Store: st, Model: p, Secret: bytes.Repeat([]byte("s"), 32), PublicURL: "http://127.0.0.1:1",
			Compaction: cc, ContextWindow: window})
	}
	older, err := anthropic.New(&anthropic.Options{APIKey: "k", BaseURL: srv.URL, Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = newRuntime(older, CompactionConfig{Mode: CompactionProvider}, 0)
	const want = "runtime config: compaction by the model's provider (rap serve --compaction provider, Compaction.Mode \"provider\") is not available: " +
		"anthropic:claude-sonnet-4-5 has no server-side compaction: Anthropic offers it for claude-opus-4-6 and claude-sonnet-4-6 only " +
		"(set anthropic.Options.ServerCompaction for a later model that has it); use --compaction auto or gorap, which summarise with the thread's own model"
	if err == nil || err.Error() != want {
		t.Fatalf("provider compaction with claude-sonnet-4-5:\n got %v\nwant %s", err, want)
	}
	_, err = newRuntime(scripted.New(nil), CompactionConfig{Mode: CompactionProvider}, 0)
	if err == nil || !strings.Contains(err.Error(), "has no compaction of its own") {
		t.Fatalf("provider compaction with the scripted model: %v; want it refused", err)
	}
	newer, err := anthropic.New(&anthropic.Options{APIKey: "k", BaseURL: srv.URL, Model: "claude-opus-4-6"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = newRuntime(newer, CompactionConfig{Mode: CompactionProvider}, 40_000)
	if err == nil || !strings.Contains(err.Error(), "50000 input tokens at least") || !strings.Contains(err.Error(), "30000") {
		t.Fatalf("provider compaction at 30000 tokens: %v; want it refused, naming the least", err)
	}
	for _, tc := range []struct {
		p      model.Provider
		window int
		who    string
	}{{older, 0, "gorap"}, {newer, 40_000, "gorap"}, {newer, 0, "provider"}} {
		rt, err := newRuntime(tc.p, CompactionConfig{}, tc.window)
		if err != nil {
			t.Fatal(err)
		}
		if who, _ := rt.CompactionInUse(); who != tc.who {
			t.Errorf("auto with %s and a window of %d: %s compacts; want %s", tc.p.Name(), tc.window, who, tc.who)
		}
	}
	if _, err := newRuntime(newer, CompactionConfig{Mode: "sometimes"}, 0); err == nil || !strings.Contains(err.Error(), `"sometimes"`) {
		t.Fatalf("an unknown mode: %v; want it refused", err)
	}
}
