package runtime

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
)

// Through the Anthropic provider, every request puts a
// cache_control breakpoint at the end of the stable head (the system
// prompt) and one on the last settled message; each breakpoint's prefix is
// repeated unchanged by the next request, so the API serves it from its
// prompt cache; and the cached and uncached input tokens it reports reach
// the "usage" events and the thread status.
func TestPromptCacheBreakpointsOnTheWire(t *testing.T) {
	const rounds = 6
	srv := wiretest.NewAnthropic(func(req wiretest.Request) wiretest.Reply {
		n := 0
		for _, m := range req.Messages {
			n += len(m.ToolCalls)
		}
		if n >= rounds {
			return wiretest.Reply{Text: "done"}
		}
		return wiretest.Reply{ToolCalls: []model.ToolCall{{Name: "work", Arguments: json.RawMessage(`{}`)}}}
	})
	defer srv.Close()
	ts := newToolServer(t, "tools", tool("work"))
	e := newEnv(t, envOptions{model: anthropicAt(t, srv, "k"), servers: []string{ts.URL()}, tweak: func(c *Config) {
		c.System = "You are a test."
	}})
	th := e.newThread()
	events, cancel := e.rt.Subscribe(th)
	defer cancel()
	e.post(th, "go")
	for range rounds {
		reply(t, ts.next(), "ok")
	}
	e.idle(th)

	reqs := srv.Requests()
	if len(reqs) != rounds+1 {
		t.Fatalf("%d model requests, want %d", len(reqs), rounds+1)
	}
	prevMsg := -1
	for i, r := range reqs {
		var head, msgs []string
		for _, bp := range r.Breakpoints {
			if strings.HasPrefix(bp.Where, "messages[") {
				msgs = append(msgs, bp.Where)
			} else {
				head = append(head, bp.Where)
			}
		}
		if !reflect.DeepEqual(head, []string{"system[0]"}) {
			t.Errorf("request %d: head breakpoints %v, want [system[0]] (tools, then system, cached together)", i, head)
		}
		if len(r.Breakpoints) > 4 {
			t.Errorf("request %d: %d breakpoints; the API allows 4", i, len(r.Breakpoints))
		}
		if i >= 2 {
			// From the third request on, earlier turns are settled.
			if len(msgs) != 1 {
				t.Fatalf("request %d: message breakpoints %v, want one on the last settled message\n%s", i, msgs, r.Body)
			}
			var at int
			if _, err := fmtSscanf(msgs[0], &at); err != nil {
				t.Fatal(err)
			}
			if at < prevMsg || at < len(r.Messages)-6 {
				t.Errorf("request %d of %d messages: breakpoint on message %d (previous request: %d); want it moving forward, close to the end", i, len(r.Messages), at, prevMsg)
			}
			prevMsg = at
			// The previous request's prefix was repeated unchanged, so the
			// API served it from the cache.
			if i >= 3 && r.CacheReadBytes < reqs[i-1].Breakpoints[len(reqs[i-1].Breakpoints)-1].PrefixBytes {
				t.Errorf("request %d: %d bytes read from the prompt cache; want the previous request's whole prefix (%d bytes)",
					i, r.CacheReadBytes, reqs[i-1].Breakpoints[len(reqs[i-1].Breakpoints)-1].PrefixBytes)
			}
		}
	}

	// The usage events and the thread status carry the cached tokens.
	var cached, total int64
	for range rounds + 1 {
		ev := waitEvent(t, events, EventUsage)
		var u usageEvent
		if err := json.Unmarshal(ev.Data, &u); err != nil {
			t.Fatal(err)
		}
		if u.UncachedInputTokens != u.InputTokens-u.CachedInputTokens || u.InputTokens <= 0 {
			t.Fatalf("usage event %s: inconsistent", ev.Data)
		}
		cached += u.CachedInputTokens
		total += u.InputTokens
	}
	if cached == 0 {
		t.Errorf("no usage event reported cached input tokens")
	}
	resp, err := http.Get(e.srv.URL + "/v1/threads/" + th)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		Usage *usageEvent `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || info.Usage == nil {
		t.Fatalf("thread status: usage missing (%v)", err)
	}
	if info.Usage.CachedInputTokens != cached || info.Usage.InputTokens != total {
		t.Errorf("thread status usage %+v; want the sums of the events: %d input, %d cached", *info.Usage, total, cached)
	}
	t.Logf("%d of %d input tokens read from the prompt cache", cached, total)
}

// fmtSscanf reads the message index of a breakpoint "messages[N].content[M]".
func fmtSscanf(where string, at *int) (int, error) {
	var block int
	return fmtSscan(where, at, &block)
}

func fmtSscan(where string, at, block *int) (int, error) {
	return fmt.Sscanf(where, "messages[%d].content[%d]", at, block)
}
