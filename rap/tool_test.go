package rap_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
)

func sdkNop[In any](context.Context, *rap.Call, In) (*rap.Reply, error) { return rap.Text(""), nil }

// RAP TS-8: a tool without parameters declares exactly
// {"type":"object","additionalProperties":false}; other inputs get the
// schema inferred from their struct.
func TestAddToolSchemas(t *testing.T) {
	type nested struct {
		X float64 `json:"x"`
	}
	type in struct {
		Name  string   `json:"name" jsonschema:"who to greet"`
		Times int      `json:"times,omitempty"`
		Tags  []string `json:"tags,omitempty"`
		At    *nested  `json:"at,omitempty"`
	}
	s := rap.NewServer("schemas", nil)
	rap.AddTool(s, &rap.Tool{Name: "empty", Description: "d"}, sdkNop[struct{}])
	rap.AddTool(s, &rap.Tool{Name: "typed", Description: "d"}, sdkNop[in])
	rap.AddTool(s, &rap.Tool{Name: "pointer", Description: "d"}, sdkNop[*in])
	explicit := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}`)
	rap.AddTool(s, &rap.Tool{Name: "explicit", Description: "d", InputSchema: explicit}, sdkNop[map[string]any])
	ts := s.Toolset("http://127.0.0.1:1")
	if err := ts.Validate(); err != nil {
		t.Fatalf("manifest does not validate: %v", err)
	}
	schemas := map[string]string{}
	for _, tool := range ts.Tools {
		schemas[tool.Name] = string(tool.InputSchema)
	}
	if got := schemas["empty"]; got != string(rap.EmptyObjectSchema) {
		t.Errorf("struct{} schema %s, want %s", got, rap.EmptyObjectSchema)
	}
	for _, want := range []string{`"name":{"type":"string","description":"who to greet"}`, `"required":["name"]`, `"additionalProperties":false`, `"tags":{"type":["null","array"]`} {
		if !strings.Contains(schemas["typed"], want) {
			t.Errorf("inferred schema %s lacks %s", schemas["typed"], want)
		}
	}
	if schemas["pointer"] != schemas["typed"] {
		t.Errorf("*In schema %s differs from In schema %s", schemas["pointer"], schemas["typed"])
	}
	if schemas["explicit"] != string(explicit) {
		t.Errorf("explicit schema replaced: %s", schemas["explicit"])
	}
}

// Programming errors are found when tools are added, with a message that
// says what to fix: among them the tool names RAP TS-2 forbids (spaces,
// duplicates).
func TestAddToolPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  func(s *rap.Server)
		want string
	}{
		{"nil tool", func(s *rap.Server) { rap.AddTool(s, nil, sdkNop[struct{}]) }, "nil *Tool"},
		{"no name", func(s *rap.Server) { rap.AddTool(s, &rap.Tool{}, sdkNop[struct{}]) }, "no name"},
		{"name with a space", func(s *rap.Server) { rap.AddTool(s, &rap.Tool{Name: "get time"}, sdkNop[struct{}]) }, "contains a space"},
		{"nil handler", func(s *rap.Server) { rap.AddTool[struct{}](s, &rap.Tool{Name: "x"}, nil) }, "nil handler"},
		{"duplicate", func(s *rap.Server) {
			rap.AddTool(s, &rap.Tool{Name: "x"}, sdkNop[struct{}])
			rap.AddSubscription(s, &rap.Tool{Name: "x"}, func(context.Context, *rap.Subscription, struct{}) error { return nil })
		}, "added twice"},
		{"non-object input", func(s *rap.Server) { rap.AddTool(s, &rap.Tool{Name: "x"}, sdkNop[int]) }, "not a struct or map"},
		{"bad schema", func(s *rap.Server) {
			rap.AddTool(s, &rap.Tool{Name: "x", InputSchema: json.RawMessage(`{"type":"nonsense"}`)}, sdkNop[struct{}])
		}, "does not compile"},
		{"raw without schema", func(s *rap.Server) {
			s.AddRawTool(&rap.Tool{Name: "x"}, func(context.Context, *rap.Call, json.RawMessage) (*rap.Reply, error) { return nil, nil })
		}, "no InputSchema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				v := recover()
				if v == nil {
					t.Fatal("no panic")
				}
				if msg, _ := v.(string); !strings.Contains(msg, tc.want) {
					t.Errorf("panic %v, want it to mention %q", v, tc.want)
				}
			}()
			tc.add(rap.NewServer("p", nil))
		})
	}
}

// AddTool decodes validated arguments into In; AddRawTool hands them over
// as JSON after validating them against the given schema (RAP IN-5).
func TestToolArguments(t *testing.T) {
	type point struct {
		X, Y float64
	}
	type in struct {
		Label  string  `json:"label"`
		Points []point `json:"points"`
	}
	sink := newSDKSink(t)
	got := make(chan in, 1)
	gotRaw := make(chan string, 1)
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "plot", Description: "Plots."},
			func(ctx context.Context, c *rap.Call, v in) (*rap.Reply, error) {
				got <- v
				return rap.Text("ok"), nil
			})
		s.AddRawTool(&rap.Tool{Name: "raw", Description: "Raw.", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","maximum":10}},"required":["n"]}`)},
			func(ctx context.Context, c *rap.Call, args json.RawMessage) (*rap.Reply, error) {
				gotRaw <- string(args)
				return rap.Text("raw ok"), nil
			})
	})
	args := map[string]any{"label": "l", "points": []map[string]float64{{"X": 1, "Y": 2}}}
	sdkPost(t, hs.URL, sdkInvocation("plot", "p1", "t", sink.URL(), args))
	if res := sink.result("p1"); res.Text != "ok" {
		t.Fatalf("result %q", res.Text)
	}
	if v := <-got; v.Label != "l" || len(v.Points) != 1 || v.Points[0].Y != 2 {
		t.Errorf("decoded %+v", v)
	}
	sdkPost(t, hs.URL, sdkInvocation("raw", "r1", "t", sink.URL(), map[string]any{"n": 3}))
	if res := sink.result("r1"); res.Text != "raw ok" || <-gotRaw != `{"n":3}` {
		t.Errorf("raw tool result %q", res.Text)
	}
	sdkPost(t, hs.URL, sdkInvocation("raw", "r2", "t", sink.URL(), map[string]any{"n": 11}))
	if res := sink.result("r2"); !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "arguments.n") || !strings.Contains(res.Text, "10") {
		t.Errorf("out-of-range raw argument gave %q, want an Error result naming arguments.n and the bound", res.Text)
	}
	select {
	case v := <-gotRaw:
		t.Errorf("the raw handler ran with invalid arguments %s", v)
	default:
	}
}

// A handler may return an error that is already a complete "Error: ..."
// message; it is sent unchanged, and a nil reply is an empty text result.
func TestHandlerErrorTextAndNilReply(t *testing.T) {
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		rap.AddTool(s, &rap.Tool{Name: "own", Description: "d"},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				return nil, errorString("Error: quota exhausted for today. Try again tomorrow.")
			})
		rap.AddTool(s, &rap.Tool{Name: "nothing", Description: "d"},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) { return nil, nil })
	})
	sdkPost(t, hs.URL, sdkInvocation("own", "o1", "t", sink.URL(), nil))
	if res := sink.result("o1"); res.Text != "Error: quota exhausted for today. Try again tomorrow." {
		t.Errorf("result %q, want the handler's own message unchanged", res.Text)
	}
	sdkPost(t, hs.URL, sdkInvocation("nothing", "n1", "t", sink.URL(), nil))
	if res := sink.result("n1"); res.Text != "" || len(res.Content) != 0 {
		t.Errorf("nil reply gave %+v, want an empty text result", res)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// checkedIn refuses a value its UnmarshalJSON finds wrong, as a tool's own
// input check (RAP IN-5) does.
type checkedIn struct{ N int }

func (c *checkedIn) UnmarshalJSON(b []byte) error {
	var v struct {
		N int `json:"n"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.N%2 != 0 {
		return errors.New(`"n" must be even; send 2, 4 or another even number`)
	}
	c.N = v.N
	return nil
}

// RAP IN-5, RE-4: arguments that pass the schema but fail the argument
// type's decoding end in an "Error: " result; a check of the type's own
// says what to send, and is not blamed on the inputSchema.
func TestArgumentDecodingErrors(t *testing.T) {
	sink := newSDKSink(t)
	ran := make(chan struct{}, 4)
	_, hs := newSDKServer(t, nil, func(s *rap.Server) {
		schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":["integer","string"]}},"required":["n"]}`)
		rap.AddTool(s, &rap.Tool{Name: "checked", Description: "d", InputSchema: schema},
			func(context.Context, *rap.Call, checkedIn) (*rap.Reply, error) {
				ran <- struct{}{}
				return rap.Text("ran"), nil
			})
		rap.AddTool(s, &rap.Tool{Name: "typed", Description: "d", InputSchema: schema},
			func(context.Context, *rap.Call, struct {
				N int `json:"n"`
			}) (*rap.Reply, error) {
				ran <- struct{}{}
				return rap.Text("ran"), nil
			})
	})
	for _, tc := range []struct {
		op, id string
		args   any
		want   []string
	}{
		{"checked", "odd", map[string]any{"n": 3}, []string{"Error: invalid arguments: \"n\" must be even; send 2, 4 or another even number. Correct them"}},
		{"typed", "str", map[string]any{"n": "three"}, []string{"Error: the arguments do not fit the tool's parameters", "inputSchema"}},
	} {
		if status, _, _ := sdkPost(t, hs.URL, sdkInvocation(tc.op, tc.id, "t", sink.URL(), tc.args)); status != 200 {
			t.Fatalf("%s: refused", tc.id)
		}
		res := sink.result(tc.id)
		for _, w := range tc.want {
			if !strings.Contains(res.Text, w) {
				t.Errorf("%s: result %q lacks %q", tc.id, res.Text, w)
			}
		}
	}
	select {
	case <-ran:
		t.Error("a handler ran with arguments its type refused")
	default:
	}
}
