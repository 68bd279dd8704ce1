package mcp

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gorap/gorap/display"
)

// RAP DS-1, DS-2: the generated display script runs in
// gorap's Rhai sandbox and names the tool's title and required arguments.
func TestDisplayScriptRenders(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"opts":{"type":"object"}},"required":["city","days","opts"]}`)
	script := displayScript(`Weather "now"`, "get_weather", schema)
	for _, c := range []struct {
		args, want string
	}{
		{`{"city":"Paris","days":3,"opts":{}}`, `Weather "now": Paris, 3`},
		{`{"days":3}`, `Weather "now": 3`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got := display.Render(ctx, "get_weather", script, json.RawMessage(c.args))
		cancel()
		if got != c.want {
			t.Errorf("Render(%s) = %q, want %q\nscript:\n%s", c.args, got, c.want, script)
		}
	}
	if got := displayScript("", "get-sum", json.RawMessage(`{"type":"object"}`)); got != "let s = \"get sum\";\ns" {
		t.Errorf("script without title or required arguments = %q", got)
	}
}
