package openai

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
)

// toolNamesMap is how function names were mapped back before toolName: a
// map from wire names, filled with the tools and then the history's
// calls, built for every completion. toolName must agree with it.
func toolNamesMap(tools []model.ToolSpec, history []model.Message) map[string]string {
	names := map[string]string{}
	for _, t := range tools {
		names[wireName(t.Name)] = t.Name
	}
	for _, m := range history {
		for _, c := range m.ToolCalls {
			names[wireName(c.Name)] = c.Name
		}
	}
	return names
}

// TestToolNameAgreesWithMap: over random tools and histories whose names
// collide once sanitized, toolName gives back what the map did, for every
// wire name of those names and for names of none.
func TestToolNameAgreesWithMap(t *testing.T) {
	long := strings.Repeat("x", 60)
	pool := []string{
		"get", "put", "get.x", "get/x", "get_x", "", "é", "_", "a-b",
		long, long + "1", long + "2", strings.Repeat("y", 64), strings.Repeat("y", 65), strings.Repeat("z", 56) + ".",
		wireName("get.x"), wireName(long + "1"),
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		var tools []model.ToolSpec
		for range r.IntN(4) {
			tools = append(tools, model.ToolSpec{Name: pool[r.IntN(len(pool))]})
		}
		var history []model.Message
		for range r.IntN(6) {
			m := model.Message{Role: model.RoleAssistant}
			for range r.IntN(3) {
				m.ToolCalls = append(m.ToolCalls, model.ToolCall{Name: pool[r.IntN(len(pool))]})
			}
			history = append(history, m, model.Message{Role: model.RoleUser, Text: "x"})
		}
		names := toolNamesMap(tools, history)
		for _, n := range append(pool, "unknown", "get_00000000") {
			for _, wire := range []string{n, wireName(n)} {
				want, ok := names[wire]
				if !ok {
					want = wire
				}
				if got := toolName(tools, history, wire); got != want {
					t.Fatalf("tools %v, history %v: toolName(%q) = %q, want %q", tools, history, wire, got, want)
				}
			}
		}
	}
}

// TestWireNameIs: wireNameIs(name, wire) is wireName(name) == wire.
func TestWireNameIs(t *testing.T) {
	names := []string{"", "a", "a.b", "é", strings.Repeat("q", 55), strings.Repeat("q", 56), strings.Repeat("q", 64), strings.Repeat("q", 65), strings.Repeat("q", 54) + "/", strings.Repeat("q", 200)}
	for _, n := range names {
		for _, m := range names {
			for _, wire := range []string{m, wireName(m)} {
				if got, want := wireNameIs(n, wire), wireName(n) == wire; got != want {
					t.Errorf("wireNameIs(%q, %q) = %v, want %v", n, wire, got, want)
				}
			}
		}
	}
}
