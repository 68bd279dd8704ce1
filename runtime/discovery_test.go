package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

var hello = []scripted.Turn{{Text: "hello", Repeat: true}}

// toolsOffered runs one message in a new thread and returns the tool names
// the model was offered.
func toolsOffered(t *testing.T, e *env, th string) []string {
	t.Helper()
	n := len(e.model.requests())
	e.post(th, "hi")
	e.idle(th)
	reqs := e.model.requests()
	if len(reqs) != n+1 {
		t.Fatalf("%d completions, want %d", len(reqs), n+1)
	}
	var names []string
	for _, tl := range reqs[n].Tools {
		if !isBuiltin(tl.Name) { // built-ins are offered in every session
			names = append(names, tl.Name)
		}
	}
	return names
}

// RAP TS-4: discovery is GET {base}/.well-known/rap-toolset with Accept:
// application/json, from the configured base URL (a trailing slash is
// dropped).
func TestTS4DiscoveryPath(t *testing.T) {
	ts := newToolServer(t, "clock", tool("get_time"))
	e := newEnv(t, envOptions{servers: []string{ts.URL() + "/"}, turns: hello})
	th := e.newThread()
	if ts.discoveries() != 1 {
		t.Fatalf("%d discovery requests, want 1", ts.discoveries())
	}
	ts.mu.Lock()
	req := ts.gets[0]
	ts.mu.Unlock()
	if req.URL.Path != "/.well-known/rap-toolset" || req.Header.Get("Accept") != "application/json" {
		t.Fatalf("discovery request: %s Accept=%q", req.URL.Path, req.Header.Get("Accept"))
	}
	if got := toolsOffered(t, e, th); !slices.Equal(got, []string{"get_time"}) {
		t.Fatalf("tools offered = %v", got)
	}
}

// RAP TS-5: an invalid toolset is reported (event and log) and none of its
// tools is exposed, while a valid toolset loads.
func TestTS5InvalidToolsetNotExposed(t *testing.T) {
	good := newToolServer(t, "good", tool("fine"))
	bad := newToolServer(t, "bad", tool("ok_tool"), rap.Tool{Name: "has space", Description: "x", InputSchema: rap.EmptyObjectSchema})
	e := newEnv(t, envOptions{servers: []string{good.URL(), bad.URL()}, turns: hello})
	th := e.newThread()
	if got := toolsOffered(t, e, th); !slices.Equal(got, []string{"fine"}) {
		t.Fatalf("tools offered = %v; the invalid toolset must expose nothing", got)
	}
	s := toolsetsEvent(t, e, th)
	if !slices.Equal(s.Loaded, []string{"good"}) || len(s.Errors) != 1 || !strings.Contains(s.Errors[0], "has space") {
		t.Fatalf("toolsets report = %+v", s)
	}
	if len(e.logs.records("toolset rejected")) != 1 {
		t.Fatalf("the invalid toolset was not logged:\n%s", e.logs)
	}
}

// toolsetsEvent returns the "toolsets" event a new client receives.
func toolsetsEvent(t *testing.T, e *env, th string) session {
	t.Helper()
	prime, err := e.rt.primeEvents(context.Background(), th)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range prime {
		if p.Type == EventToolsets {
			var s session
			if err := json.Unmarshal(p.Data, &s); err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	t.Fatalf("no toolsets event")
	return session{}
}

// RAP TS-6: a tool name in two toolsets is an error and neither tool is
// exposed; each remaining tool dispatches to its own toolset's endpoint.
func TestTS6CollisionRemovesBoth(t *testing.T) {
	a := newToolServer(t, "alpha", tool("shared"), tool("only_a"))
	b := newToolServer(t, "beta", tool("shared"), tool("only_b"))
	e := newEnv(t, envOptions{servers: []string{a.URL(), b.URL()}, turns: []scripted.Turn{
		{AfterUser: "hi", Text: "hello"},
		{AfterUser: "call", ToolCalls: []scripted.Call{call("only_a", `{}`), call("only_b", `{}`)}},
		{Text: "done", Repeat: true},
	}})
	th := e.newThread()
	if got := toolsOffered(t, e, th); !slices.Equal(got, []string{"only_a", "only_b"}) {
		t.Fatalf("tools offered = %v, want only_a and only_b", got)
	}
	s := toolsetsEvent(t, e, th)
	if len(s.Errors) != 1 || !strings.Contains(s.Errors[0], `"shared"`) || !strings.Contains(s.Errors[0], "alpha") || !strings.Contains(s.Errors[0], "beta") {
		t.Fatalf("collision report = %+v", s.Errors)
	}
	e.post(th, "call both")
	if inv := a.next(); inv.Operation != "only_a" {
		t.Fatalf("alpha got %q", inv.Operation)
	}
	if inv := b.next(); inv.Operation != "only_b" {
		t.Fatalf("beta got %q", inv.Operation)
	}
}

// RAP TS-7: manifests are cached per session: later slices (and a restart)
// reuse the session's copy; a new session fetches afresh; when a fetch
// fails the most recent cached copy is used; with no cached copy the error
// is reported.
func TestTS7CachePerSession(t *testing.T) {
	ts := newToolServer(t, "svc", tool("v1_tool"))
	never := newToolServer(t, "never", tool("never_tool"))
	never.setDown(true)
	e := newEnv(t, envOptions{servers: []string{ts.URL(), never.URL()}, turns: hello})
	s1 := e.newThread()
	if got := toolsOffered(t, e, s1); !slices.Equal(got, []string{"v1_tool"}) {
		t.Fatalf("session 1 tools = %v", got)
	}
	rep := toolsetsEvent(t, e, s1)
	if len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], never.URL()) {
		t.Fatalf("the unreachable server without a cached copy was not reported: %+v", rep)
	}

	// The server changes its manifest: session 1 keeps its copy, even
	// across a restart, without fetching again.
	ts.mu.Lock()
	ts.tools = []rap.Tool{tool("v2_tool")}
	ts.mu.Unlock()
	if got := toolsOffered(t, e, s1); !slices.Equal(got, []string{"v1_tool"}) {
		t.Fatalf("session 1 tools after the change = %v, want the cached v1_tool", got)
	}
	e.restart()
	if got := toolsOffered(t, e, s1); !slices.Equal(got, []string{"v1_tool"}) {
		t.Fatalf("session 1 tools after a restart = %v, want the cached v1_tool", got)
	}
	if n := ts.discoveries(); n != 1 {
		t.Fatalf("%d discovery requests, want 1: a session reuses its cached copy", n)
	}

	// A new session fetches afresh.
	s2 := e.newThread()
	if got := toolsOffered(t, e, s2); !slices.Equal(got, []string{"v2_tool"}) {
		t.Fatalf("session 2 tools = %v, want v2_tool", got)
	}

	// The server goes down: a new session uses the most recent cached copy.
	ts.setDown(true)
	s3 := e.newThread()
	if got := toolsOffered(t, e, s3); !slices.Equal(got, []string{"v2_tool"}) {
		t.Fatalf("session 3 tools = %v, want the cached v2_tool", got)
	}
	rep = toolsetsEvent(t, e, s3)
	if !slices.Equal(rep.Loaded, []string{"svc"}) {
		t.Fatalf("session 3 report = %+v", rep)
	}
	if len(e.logs.records("toolset discovery failed; using the cached copy")) != 1 {
		t.Fatalf("fallback not logged:\n%s", e.logs)
	}
	var cached []store.CachedToolset
	e.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		cached, err = tx.SessionToolsets(s3)
		return err
	})
	if len(cached) != 1 || !strings.Contains(string(cached[0].Manifest), "v2_tool") {
		t.Fatalf("session 3 cache = %+v", cached)
	}
}

// RAP TS-9: descriptions and annotations are untrusted: the model sees them
// as they were served, and nothing in them is run, expanded or templated.
func TestTS9DescriptionsAreUntrusted(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "pwned")
	desc := "Reads a file. $(touch " + marker + ") `touch " + marker + "` {{thread_id}} {{last_result}} " +
		`let f = open("` + marker + `"); <script>alert(1)</script>`
	tl := rap.Tool{Name: "reader", Description: desc, InputSchema: rap.EmptyObjectSchema,
		Annotations: &rap.Annotations{RequiresAuth: "$(touch " + marker + ")",
			Custom: map[string]json.RawMessage{"x-on-load": json.RawMessage(`"rm -rf / ; touch ` + marker + `"`)}}}
	ts := newToolServer(t, "files", tl)
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: hello})
	th := e.newThread()
	toolsOffered(t, e, th)
	reqs := e.model.requests()
	var got *model.ToolSpec
	for i, spec := range reqs[len(reqs)-1].Tools {
		if spec.Name == "reader" {
			got = &reqs[len(reqs)-1].Tools[i]
		}
	}
	if got == nil {
		t.Fatal("the tool was not offered")
	}
	if got.Description != desc {
		t.Errorf("the model saw the description as %q, want it exactly as served, %q", got.Description, desc)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("something in the description or annotations ran: %s exists (%v)", marker, err)
	}
}
