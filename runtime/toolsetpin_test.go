package runtime

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// manifestOf is the document ts serves by default.
func manifestOf(ts *toolServer, tools ...rap.Tool) []byte {
	b, _ := json.Marshal(rap.Toolset{Name: ts.name, Endpoint: ts.srv.URL + "/invoke", Tools: tools})
	return b
}

func digestOf(t *testing.T, doc []byte) string {
	t.Helper()
	d, err := rap.ToolsetDigest(doc)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// serve makes ts serve doc as its discovery document.
func (ts *toolServer) serve(doc []byte) {
	ts.mu.Lock()
	ts.manifest = doc
	ts.mu.Unlock()
}

func withPins(pins map[string]ToolsetPin) func(*Config) {
	return func(c *Config) { c.ToolsetPins = pins }
}

// sessionCopy returns the manifest the store holds for session root and
// tool server base, or nil.
func sessionCopy(t *testing.T, st store.Store, root, base string) []byte {
	t.Helper()
	var out []byte
	err := st.View(context.Background(), func(tx store.Tx) error {
		cs, err := tx.SessionToolsets(root)
		for _, c := range cs {
			if c.BaseURL == base {
				out = c.Manifest
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// forget drops the session from memory, as the bounded session map does:
// its next use rebuilds it from the store.
func (e *env) forget(root string) {
	e.rt.mu.Lock()
	delete(e.rt.catalogs, root)
	e.rt.mu.Unlock()
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// RAP TS-11: a document whose RFC 8785 digest is the pinned one loads, even
// when it is served with its members reordered and other whitespace than
// the copy the digest was computed from.
func TestTS11PinnedDigestAcceptsTheSameDocumentWrittenAnotherWay(t *testing.T) {
	ts := newToolServer(t, "clock", tool("get_time"))
	pinned := manifestOf(ts, tool("get_time"))
	var v map[string]any
	if err := json.Unmarshal(pinned, &v); err != nil {
		t.Fatal(err)
	}
	served := []byte("{\n  \"tools\": [{\"inputSchema\": {\"additionalProperties\": false, \"type\": \"object\"}, \"description\": \"test tool get_time\", \"name\": \"get_time\"}],\n  \"endpoint\": \"" + v["endpoint"].(string) + "\",\n\t\"name\": \"clock\"\n}\n")
	if string(served) == string(pinned) {
		t.Fatal("the served document must differ in bytes from the pinned one")
	}
	ts.serve(served)
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: hello,
		tweak: withPins(map[string]ToolsetPin{ts.URL(): {SHA256: digestOf(t, pinned), File: "rap.json", Entry: "tool_sets[0]"}})})
	th := e.newThread()
	if got := toolsOffered(t, e, th); !slices.Equal(got, []string{"get_time"}) {
		t.Fatalf("tools offered = %v, want get_time: the served document is the pinned one", got)
	}
	if rep := toolsetsEvent(t, e, th); len(rep.Errors) != 0 {
		t.Fatalf("toolsets errors = %v, want none", rep.Errors)
	}
}

// RAP TS-11: a document with another digest than the pinned one is
// refused: none of its tools is offered, it is not cached, the error (in
// the toolsets event and the log) has both digests and says what to
// change, and the other tool servers' tools are still offered.
func TestTS11PinnedDigestMismatchRefusesOnlyThatToolset(t *testing.T) {
	pinnedSrv := newToolServer(t, "pinned", tool("pinned_tool"))
	other := newToolServer(t, "other", tool("other_tool"))
	want := digestOf(t, manifestOf(pinnedSrv, tool("pinned_tool"), tool("extra")))
	got := digestOf(t, manifestOf(pinnedSrv, tool("pinned_tool")))
	e := newEnv(t, envOptions{servers: []string{pinnedSrv.URL(), other.URL()}, turns: hello,
		tweak: withPins(map[string]ToolsetPin{pinnedSrv.URL(): {SHA256: want, File: "/etc/rap/rap.json", Entry: "tool_sets[0]"}})})
	th := e.newThread()
	if tools := toolsOffered(t, e, th); !slices.Equal(tools, []string{"other_tool"}) {
		t.Fatalf("tools offered = %v, want only other_tool", tools)
	}
	rep := toolsetsEvent(t, e, th)
	if !slices.Equal(rep.Loaded, []string{"other"}) || len(rep.Errors) != 1 {
		t.Fatalf("toolsets = %+v, want other loaded and one error", rep)
	}
	if msg := rep.Errors[0]; !containsAll(msg, pinnedSrv.URL(), "sha256 "+got, "pins sha256 "+want,
		`update "sha256" in /etc/rap/rap.json (tool_sets[0]) to "`+got+`"`) {
		t.Errorf("error %q lacks the server, both digests or what to change", msg)
	}
	recs := e.logs.records("toolset refused: its discovery document does not match its pin")
	if len(recs) != 1 || recs[0]["sha256"] != got || recs[0]["pinned_sha256"] != want {
		t.Errorf("refusal log records = %v, want one with both digests", recs)
	}
	if c := sessionCopy(t, e.st, th, pinnedSrv.URL()); c != nil {
		t.Errorf("the refused document was cached for the session: %s", c)
	}
	// The refusal holds when the session is rebuilt from the store.
	e.forget(th)
	if tools := toolsOffered(t, e, th); !slices.Equal(tools, []string{"other_tool"}) {
		t.Fatalf("tools offered after a rebuild = %v, want only other_tool", tools)
	}
}

// RAP TS-11, trust on first use: a session trusts the document it first
// discovers and refuses a different one for the rest of the session, on
// every path by which the session loads it (a new discovery, its stored
// copy); a new session trusts the new document.
func TestTS11FirstUseRefusesAChangeWithinTheSession(t *testing.T) {
	srv := newToolServer(t, "svc", tool("v1_tool"))
	other := newToolServer(t, "other", tool("other_tool"))
	v1 := manifestOf(srv, tool("v1_tool"))
	v2 := manifestOf(srv, tool("v2_tool"))
	e := newEnv(t, envOptions{servers: []string{srv.URL(), other.URL()}, turns: hello,
		tweak: withPins(map[string]ToolsetPin{srv.URL(): {FirstUse: true, File: "rap.json", Entry: "tool_sets[0]"}})})
	s1 := e.newThread()
	if tools := toolsOffered(t, e, s1); !slices.Equal(tools, []string{"v1_tool", "other_tool"}) {
		t.Fatalf("session 1 tools = %v, want v1_tool and other_tool", tools)
	}

	// The server changes its document; the session discovers it again.
	srv.serve(v2)
	e.rt.discover(context.Background(), s1)
	if tools := toolsOffered(t, e, s1); !slices.Equal(tools, []string{"other_tool"}) {
		t.Fatalf("session 1 tools after the change = %v, want only other_tool", tools)
	}
	rep := toolsetsEvent(t, e, s1)
	if len(rep.Errors) != 1 || !containsAll(rep.Errors[0], "sha256 "+digestOf(t, v2), "trusted sha256 "+digestOf(t, v1), "start a new session") {
		t.Fatalf("toolsets errors = %v, want one with both digests that says to start a new session", rep.Errors)
	}
	if c := sessionCopy(t, e.st, s1, srv.URL()); !strings.Contains(string(c), "v1_tool") {
		t.Fatalf("the session's stored copy = %s, want the trusted v1 kept", c)
	}

	// The session's stored copy changes under it: refused when rebuilt.
	if err := e.st.Update(context.Background(), func(tx store.Tx) error {
		return tx.PutToolset(store.CachedToolset{RootID: s1, BaseURL: srv.URL(), Manifest: v2, Fetched: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	e.forget(s1)
	if tools := toolsOffered(t, e, s1); !slices.Equal(tools, []string{"other_tool"}) {
		t.Fatalf("session 1 tools from a changed stored copy = %v, want only other_tool", tools)
	}
	if rep := toolsetsEvent(t, e, s1); len(rep.Errors) != 1 || !containsAll(rep.Errors[0], "this session's copy", "trusted sha256 "+digestOf(t, v1)) {
		t.Fatalf("toolsets errors after the rebuild = %v", rep.Errors)
	}

	// A new session trusts the document it discovers.
	s2 := e.newThread()
	if tools := toolsOffered(t, e, s2); !slices.Equal(tools, []string{"v2_tool", "other_tool"}) {
		t.Fatalf("session 2 tools = %v, want v2_tool and other_tool", tools)
	}
}

// RAP TS-11, trust on first use: the digest a session trusted survives a
// restart, on SQLite and on PostgreSQL: the session keeps its trusted
// document, refuses a changed one, and a session created after the restart
// trusts the new one.
func TestTS11FirstUseSurvivesRestart(t *testing.T) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			srv := newToolServer(t, "svc", tool("v1_tool"))
			v1 := manifestOf(srv, tool("v1_tool"))
			v2 := manifestOf(srv, tool("v2_tool"))
			e := newEnv(t, envOptions{servers: []string{srv.URL()}, turns: hello, postgres: pg,
				tweak: withPins(map[string]ToolsetPin{srv.URL(): {FirstUse: true}})})
			s1 := e.newThread()
			srv.serve(v2)
			e.restart()
			if tools := toolsOffered(t, e, s1); !slices.Equal(tools, []string{"v1_tool"}) {
				t.Fatalf("session 1 tools after a restart = %v, want its trusted v1_tool", tools)
			}
			e.stop()
			e.offline(func(tx store.Tx) error {
				return tx.PutToolset(store.CachedToolset{RootID: s1, BaseURL: srv.URL(), Manifest: v2, Fetched: time.Now()})
			})
			e.start()
			if tools := toolsOffered(t, e, s1); len(tools) != 0 {
				t.Fatalf("session 1 tools from a changed copy after a restart = %v, want none", tools)
			}
			rep := toolsetsEvent(t, e, s1)
			if len(rep.Errors) != 1 || !containsAll(rep.Errors[0], "sha256 "+digestOf(t, v2), "trusted sha256 "+digestOf(t, v1)) {
				t.Fatalf("toolsets errors = %v, want both digests", rep.Errors)
			}
			s2 := e.newThread()
			if tools := toolsOffered(t, e, s2); !slices.Equal(tools, []string{"v2_tool"}) {
				t.Fatalf("a new session's tools = %v, want v2_tool", tools)
			}
		})
	}
}

// New refuses malformed pins and pins of tool servers it is not given.
func TestToolsetPinsCheckedByNew(t *testing.T) {
	e := newEnv(t, envOptions{})
	cfg := e.cfg
	cfg.Store = e.st
	cfg.ToolServers = []string{"http://a.example"}
	cfg.ToolsetPins = map[string]ToolsetPin{
		"http://a.example": {SHA256: "ABC", FirstUse: true},
		"http://b.example": {FirstUse: true},
	}
	_, err := New(&cfg)
	if err == nil || !containsAll(err.Error(), `ToolsetPins["http://a.example"].SHA256 "ABC" is not 64 lowercase hex digits`,
		`ToolsetPins["http://a.example"] sets both SHA256 and FirstUse`, `ToolsetPins["http://b.example"]: no tool server`) {
		t.Fatalf("New = %v, want each bad pin named", err)
	}
}
