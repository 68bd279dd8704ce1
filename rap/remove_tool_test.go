package rap_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/gorap/gorap/rap"
)

// A bridge whose tool list changes at run time removes
// tools; the manifest no longer lists them and the name can be added
// again with a new schema.
func TestRemoveTool(t *testing.T) {
	s := rap.NewServer("dyn", nil)
	h := func(ctx context.Context, c *rap.Call, args json.RawMessage) (*rap.Reply, error) {
		return rap.Text("ok"), nil
	}
	for _, n := range []string{"a", "b", "c"} {
		s.AddRawTool(&rap.Tool{Name: n, Description: n, InputSchema: rap.EmptyObjectSchema}, h)
	}
	if !s.RemoveTool("b") || s.RemoveTool("b") || s.RemoveTool("zzz") {
		t.Fatal("RemoveTool should report true once for a present tool, false otherwise")
	}
	names := func() []string {
		var n []string
		for _, tool := range s.Toolset("http://x/").Tools {
			n = append(n, tool.Name)
		}
		return n
	}
	if got := names(); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("tools after removing b = %v", got)
	}
	s.AddRawTool(&rap.Tool{Name: "b", Description: "b again", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}, h)
	if got := names(); !slices.Equal(got, []string{"a", "c", "b"}) {
		t.Fatalf("tools after adding b again = %v", got)
	}
}
