package mcp

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gorap/gorap/rap"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The wire tap finds progress notifications in stdio
// lines and event-stream data lines, split across reads, passes every
// byte through unchanged and ignores requests, other methods and
// oversized lines.
func TestProgressTap(t *testing.T) {
	for _, sse := range []bool{false, true} {
		pre := ""
		if sse {
			pre = "event: message\ndata: "
		}
		in := pre + `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"rap-1","progress":1,"total":2,"message":"half"}}` + "\n" +
			pre + `{"jsonrpc":"2.0","id":3,"method":"notifications/progress","params":{"progressToken":"rap-1","progress":9}}` + "\n" +
			pre + `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"notifications/progress"}}` + "\n" +
			pre + `{"x":"` + strings.Repeat("a", maxTapLine+10) + `"}` + "\n" +
			pre + `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"rap-1","progress":2,"total":2}}` + "\r\n"
		var got []*sdk.ProgressNotificationParams
		tap := &progressTap{r: iotest.OneByteReader(strings.NewReader(in)), sse: sse, deliver: func(p *sdk.ProgressNotificationParams) { got = append(got, p) }}
		out, err := io.ReadAll(tap)
		if err != nil || !bytes.Equal(out, []byte(in)) {
			t.Fatalf("sse=%v: the tap changed the stream (err %v)", sse, err)
		}
		if len(got) != 2 || got[0].Progress != 1 || got[0].Message != "half" || got[1].Progress != 2 || got[0].ProgressToken != "rap-1" {
			t.Errorf("sse=%v: delivered %+v", sse, got)
		}
	}
}

// Progress from a stdio server (a real process) reaches
// the runtime as view updates before the result.
func TestProgressStdio(t *testing.T) {
	f := startStdio(t, nil)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "progress", map[string]any{"steps": 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Result(ctx); err != nil {
		t.Fatal(err)
	}
	var views []*rap.ViewUpdate
	for _, m := range c.Messages() {
		if v, ok := m.(*rap.ViewUpdate); ok {
			views = append(views, v)
		}
		if _, ok := m.(*rap.ToolResult); ok {
			break
		}
	}
	if len(views) == 0 || !strings.Contains(string(views[len(views)-1].Content), `"progress":4`) {
		t.Errorf("view updates before the result: %d, last %+v", len(views), views)
	}
}
