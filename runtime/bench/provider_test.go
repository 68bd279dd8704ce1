package bench

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/openai"
	"github.com/gorap/gorap/model/wiretest"
)

// The cycle runs through the real provider packages
// against a local server speaking their wire format, streaming; threads
// that spend their budget are replaced, so the loop keeps running past it.
func TestRunCyclesThroughProviders(t *testing.T) {
	script := func(req wiretest.Request) wiretest.Reply {
		n := 0
		for _, m := range req.Messages {
			n += len(m.ToolCalls)
		}
		if n >= 3 {
			return wiretest.Reply{Text: "done"}
		}
		return wiretest.Reply{ToolCalls: []model.ToolCall{{Name: "work", Arguments: json.RawMessage(`{}`)}}}
	}
	for _, api := range []string{"anthropic", "openai"} {
		t.Run(api, func(t *testing.T) {
			var (
				srv  *wiretest.Server
				prov model.Provider
				err  error
			)
			if api == "anthropic" {
				srv = wiretest.NewAnthropic(script)
				prov, err = anthropic.New(&anthropic.Options{APIKey: "k", BaseURL: srv.URL})
			} else {
				srv = wiretest.NewOpenAI(script)
				prov, err = openai.New(&openai.Options{APIKey: "k", BaseURL: srv.URL + "/v1"})
			}
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			// Enough cycles that every first thread spent its budget.
			rep, err := RunCycles(context.Background(), CycleOptions{Threads: 2, Cycles: 12, Budget: 3, Model: prov,
				Duration: 20 * time.Second, Warmup: 100 * time.Millisecond, DataDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Failures != 0 {
				t.Errorf("%d results or new threads failed; the first: %s", rep.Failures, rep.FirstFailure)
			}
			if got := len(srv.Requests()); got < 12 {
				t.Errorf("the wire server saw %d requests; want at least 12", got)
			}
			for _, r := range srv.Requests() {
				if !r.Stream {
					t.Fatalf("a request was not streamed: %s", r.Body)
				}
			}
		})
	}
}
