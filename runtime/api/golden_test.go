package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// updateGolden rewrites testdata/golden: go test ./runtime/api -run TestWireGolden -update
var updateGolden = flag.Bool("update", false, "rewrite testdata/golden/*.json from the current types")

// Fixed times, so the golden files do not change between runs.
var (
	t0 = time.Date(2026, 11, 27, 9, 30, 0, 123456789, time.UTC)
	t1 = t0.Add(2 * time.Second)
	t2 = t0.Add(90 * time.Second)
)

// wireRoot and wireChild are fully populated threads: every field of
// Thread is set.
var (
	wireRoot = Thread{
		ID: "thr-root", RootID: "thr-root", Status: ThreadStatusActive, Created: t0, UserID: "ada",
		Title: "Time in Tokyo", Archived: true,
	}
	wireChild = Thread{
		ID: "thr-child", ParentID: "thr-root", RootID: "thr-root", Status: ThreadStatusClosed, Created: t1,
		OriginCallID: "call-sub", OriginTool: "subscribe_clock", OriginArgs: json.RawMessage(`{"interval_seconds":1}`),
		InheritSeq: 4, UserID: "ada",
	}
)

// wireHistory is a history with every field of Message,
// ToolCall and ToolResult set somewhere: text, tool calls with
// arguments and display, results with content items (text and image),
// display_as segments (text, diff, image), an error and a subscription
// confirmation.
var wireHistory = []Message{
	{ThreadID: "thr-root", Seq: 1, Role: RoleUser, Text: "What time is it in Tokyo?", Created: t0},
	{ThreadID: "thr-root", Seq: 2, Role: RoleAssistant, Text: "Let me ask the clock.", Created: t0,
		ToolCalls: []ToolCall{
			{ID: "call-1", Name: "get_time_in_zone", Arguments: json.RawMessage(`{"timezone":"Asia/Tokyo"}`), Display: "Time in Asia/Tokyo"},
			{ID: "call-sub", Name: "subscribe_clock", Arguments: json.RawMessage(`{"interval_seconds":1}`), Display: "Clock every 1s"},
		}},
	{ThreadID: "thr-root", Seq: 3, Role: RoleTool, Created: t1,
		ToolResults: []ToolResult{
			{CallID: "call-1", Name: "get_time_in_zone", Text: "18:30 JST",
				Content:   []rap.ContentItem{{Type: "text", Text: "18:30 JST"}, {Type: "image", Data: "iVBORw0K", MediaType: "image/png"}},
				DisplayAs: []rap.DisplaySegment{rap.TextSegment("18:30"), rap.DiffSegment("a.txt", "@@ -1 +1 @@\n-a\n+b\n"), rap.ImageSegment("iVBORw0K", "image/png")}},
			{CallID: "call-sub", Name: "subscribe_clock", Text: "Subscribed", Subscription: true},
			{CallID: "call-2", Name: "broken", Text: "the tool failed", IsError: true},
		}},
	{ThreadID: "thr-root", Seq: 4, Role: RoleAssistant, Text: "In Tokyo it is 18:30.", Created: t1},
}

// wireInputFields is a user input's form with every member of a field.
var wireInputFields = []rap.InputField{
	{Name: "email", Title: "Email", Description: "Where the receipt goes", Type: rap.InputString, Required: true,
		Default: json.RawMessage(`"ada@example.com"`), MinLength: new(3), MaxLength: new(254), Format: rap.FormatEmail},
	{Name: "seats", Type: rap.InputInteger, Minimum: new(1.0), Maximum: new(10.0)},
	{Name: "plan", Type: rap.InputEnum, Options: []string{"free", "pro"}},
}

var wireInput = Input{ThreadID: "thr-root", CallID: "call-input", ToolName: "sign_up", Prompt: "Your details?", Fields: wireInputFields, Created: t0}

var wireChoice = Choice{
	ThreadID: "thr-root", CallID: "call-choice", ToolName: "pick_one", Prompt: "Which branch?",
	Choices: []string{"main", "dev"}, Default: 1, Created: t1,
}

var wireUsage = Usage{InputTokens: 1200, CachedInputTokens: 1000, UncachedInputTokens: 150, CacheWriteInputTokens: 50, OutputTokens: 80}

// wireThreadInfo sets every field of ThreadInfo, the embedded Thread's
// included.
var wireThreadInfo = ThreadInfo{
	Thread: wireRoot,
	State:  StateWaitingTools,
	PendingCalls: []Call{{
		ThreadID: "thr-root", CallID: "call-sub", ToolName: "subscribe_clock", Arguments: json.RawMessage(`{"interval_seconds":1}`),
		Toolset: "gettime", Endpoint: "http://127.0.0.1:3001", TurnSeq: 2, State: CallDispatched,
		Deadline: t2, Created: t0, Updated: t1,
	}},
	Subscriptions: []Subscription{{ThreadID: "thr-root", CallID: "call-sub", ToolName: "subscribe_clock", State: SubscriptionActive, Created: t1}},
	Queued:        2, LastSeq: 4,
	Children:           []string{"thr-child"},
	ChildrenNextCursor: "cursor-children-2",
	Choices:            []Choice{wireChoice},
	Inputs:             []Input{wireInput},
	Usage:              &wireUsage,
	SessionUsage:       &Usage{InputTokens: 2400, CachedInputTokens: 2000, UncachedInputTokens: 400, CacheWriteInputTokens: 100, OutputTokens: 160},
	Budgets: []Budget{
		{Tool: "fetch", TokensLimit: 200, TokensSpent: 512, USDLimit: 0.5, USDSpent: 0.0123, Unpriced: true},
		{Tool: "peek", TokensSpent: 40, USDLimit: 1, USDSpent: 0.25},
	},
	SessionBudget: &SessionBudget{TokensLimit: 2000000, TokensSpent: 2560, USDLimit: 5, USDSpent: 0.0246, Unpriced: true, Over: true},
}

// wireResponses are the bodies of the /v1 requests and answers, one golden
// file each. thread_info_minimal is a new thread as GET /v1/threads/{id}
// answers it.
var wireResponses = map[string]any{
	"create_thread_request":   CreateThreadRequest{UserID: "ada"},
	"create_thread_response":  CreateThreadResponse{ID: "thr-root", Toolsets: &Toolsets{Loaded: []string{"gettime"}, Errors: []string{"http://127.0.0.1:3002: connection refused"}}},
	"thread_page":             ThreadPage{Threads: []Thread{wireRoot, wireChild}, NextCursor: "cursor-2"},
	"thread_info":             wireThreadInfo,
	"thread_info_minimal":     ThreadInfo{Thread: Thread{ID: "thr-root", RootID: "thr-root", Status: ThreadStatusActive, Created: t0}, PendingCalls: []Call{}, Subscriptions: []Subscription{}, Children: []string{}, Choices: []Choice{}},
	"post_message_request":    PostMessageRequest{Text: new("What time is it in Tokyo?")},
	"post_message_response":   PostMessageResponse{Status: MessageQueued},
	"history_response":        HistoryResponse{Messages: wireHistory},
	"choices_response":        ChoicesResponse{Choices: []Choice{wireChoice}},
	"answer_choice_request":   AnswerChoiceRequest{Selected: new(1), Dismiss: false},
	"answer_choice_response":  AnswerChoiceResponse{Status: "answered", Selected: 1},
	"inputs_response":         InputsResponse{Inputs: []Input{wireInput}},
	"answer_input_request":    AnswerInputRequest{Values: map[string]json.RawMessage{"email": json.RawMessage(`"ada@example.com"`), "seats": json.RawMessage(`2`)}},
	"answer_input_response":   AnswerInputResponse{Status: "sent"},
	"close_response":          CloseResponse{Status: "closed"},
	"delete_session_response": DeleteSessionResponse{DeletedThreads: 3},
	"update_thread_request":   UpdateThreadRequest{Title: new("Time in Tokyo"), Archived: new(true)},
	"error_response":          ErrorResponse{Error: "no thread thr-x: list the threads with GET /v1/threads"},
	"waiting_response": WaitingResponse{AsOf: t2, Threads: []WaitingThread{
		{ThreadID: "thr-child", ParentID: "thr-root", RootID: "thr-root", UserID: "ada", Title: "Time in Tokyo", State: StateWaitingTools,
			Since: t0, More: 2, WaitingOn: []WaitItem{
				{Kind: WaitTool, CallID: "call-1", Tool: "get_time_in_zone", Toolset: "gettime", Since: t0},
				{Kind: WaitTimer, CallID: "call-2", Tool: "sleep", Toolset: "builtin", Since: t1, Due: t2},
			}},
		{ThreadID: "thr-root", RootID: "thr-root", UserID: "ada", Title: "Time in Tokyo", State: StateWaitingChildren, Since: t0,
			WaitingOn: []WaitItem{{Kind: WaitChildren, ThreadID: "thr-child", Since: t0}}},
		{ThreadID: "thr-watch", RootID: "thr-watch", State: StateWaitingTools, Since: t0,
			WaitingOn: []WaitItem{{Kind: WaitSubscription, CallID: "call-3", Tool: "watch_prices", Since: t0}}},
		{ThreadID: "thr-other", RootID: "thr-other", State: StateFailed, Since: t1, LastErrorUnknown: true,
			WaitingOn: []WaitItem{{Kind: WaitRetry, Since: t1, Due: t2}}},
		{ThreadID: "thr-third", RootID: "thr-third", State: StateFailed, Since: t1, LastError: "model: 529 overloaded",
			WaitingOn: []WaitItem{{Kind: WaitRetry, Since: t1}}},
	}},
}

// wireEvents are the payloads of the events of GET /v1/threads/{id}/events,
// keyed by event type, as events.go documents them. Every Event* constant
// of events.go must have one (TestWireGoldenCoversEveryEvent).
var wireEvents = map[string]any{
	EventTextDelta: TextDelta{Text: "In Tokyo"},
	EventMessage:   wireHistory[1],
	EventToolCall:  ToolCallEvent{CallID: "call-1", Name: "get_time_in_zone", Arguments: json.RawMessage(`{"timezone":"Asia/Tokyo"}`), Display: "Time in Asia/Tokyo"},
	EventToolResult: ToolResultEvent{CallID: "call-1", Name: "get_time_in_zone", Text: "18:30 JST",
		Content:   []rap.ContentItem{{Type: "text", Text: "18:30 JST"}, {Type: "image", Data: "iVBORw0K", MediaType: "image/png"}},
		DisplayAs: []rap.DisplaySegment{rap.TextSegment("18:30"), rap.DiffSegment("a.txt", "@@ -1 +1 @@\n-a\n+b\n")}, IsError: true},
	EventError:          Error{Message: "model: 529 overloaded", Attempt: 2, MaxAttempts: 5, RetryInMS: 10000, Final: true},
	EventUsage:          wireUsage,
	EventCompacted:      Compaction{UpToSeq: 40, Messages: 40, Summary: "The user asked for a weekly report; it runs on Mondays.", Created: t0},
	EventStatus:         Status{State: StateRunning},
	EventTurnEnded:      TurnEnded{ThreadID: "thr-child", State: StateWaitingChildren, LastSeq: 12},
	EventView:           View{ViewType: "todo", Content: json.RawMessage(`{"items":["a","b"]}`)},
	EventToolsets:       Toolsets{Loaded: []string{"gettime", "github"}, Errors: []string{"http://127.0.0.1:3002: connection refused"}},
	EventOAuth:          OAuth{CallID: "call-gh", Name: "list_repos", AuthURL: "https://github.example/login/oauth/authorize?state=s"},
	EventUserChoice:     UserChoice{CallID: "call-choice", Name: "pick_one", Prompt: "Which branch?", Choices: []string{"main", "dev"}, Default: 1},
	EventChoiceAnswered: ChoiceAnswered{CallID: "call-choice", Selected: 1, Dismissed: true},
	EventUserInput:      UserInput{CallID: "call-input", Name: "sign_up", Prompt: "Your details?", Fields: wireInputFields},
	EventInputAnswered:  InputAnswered{CallID: "call-input", Dismissed: true},
	EventThreadSpawned:  ThreadSpawned{ThreadID: "thr-child", ParentID: "thr-root", OriginCallID: "call-sub", OriginTool: "subscribe_clock", Reason: SubscriptionEvent},
	EventThreadClosed:   ThreadClosed{ThreadID: "thr-child"},
	EventThreadUpdated:  wireRoot,
	EventThread:         wireThreadInfo,
	EventReset:          Reset{Reason: "the runtime restarted"},
	EventReplayDone:     ReplayDone{Mode: ReplayFull, LastSeq: 4},
}

// TestWireGolden pins the JSON of the client API (/v1): every request and
// answer body and every event payload, fully populated, marshals exactly
// as testdata/golden/<name>.json says.
//
// A failure means the public API changed: clients written against the
// released JSON would break. Fix the code so the JSON stays the same. Only
// for a deliberate change, listed in CHANGELOG.md, rewrite the files with
//
//	go test ./runtime/api -run TestWireGolden -update
//
// and review the diff of testdata/golden.
func TestWireGolden(t *testing.T) {
	cases := map[string]any{}
	for name, v := range wireResponses {
		cases[name] = v
	}
	for typ, v := range wireEvents {
		cases["event_"+typ] = v
	}
	cases["zero_values"] = zeroValues(cases)
	for name, v := range cases {
		got, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got = append(got, '\n')
		path := filepath.Join("testdata", "golden", name+".json")
		if *updateGolden {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (a new type: write its golden with -update)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("the /v1 JSON of %s (%T) changed: the public API changed.\ngot:\n%s\nwant (%s):\n%s", name, v, got, path, want)
		}
	}
	// No golden file is left without its case.
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if _, ok := cases[name]; !ok {
			t.Errorf("%s has no case in TestWireGolden: add one or delete the file", f)
		}
	}
}

// zeroValues maps each case's name, and the name of each record the cases
// hold, to the zero value of its type: which members an empty value omits
// (omitempty, omitzero) is part of the API too, and fully populated values
// do not show it. Keys are API names, not Go type names, so that giving a
// type its own definition with the same JSON changes no golden.
func zeroValues(cases map[string]any) map[string]any {
	zero := map[string]any{
		"Thread": Thread{}, "Message": Message{}, "ToolCall": ToolCall{}, "ToolResult": ToolResult{},
		"Call": Call{}, "Subscription": Subscription{}, "Choice": Choice{}, "WaitingThread": WaitingThread{}, "WaitItem": WaitItem{},
		"rap.ContentItem": rap.ContentItem{}, "rap.DisplaySegment": rap.DisplaySegment{},
	}
	for name, v := range cases {
		zero[name] = reflect.Zero(reflect.TypeOf(v)).Interface()
	}
	return zero
}

// Every event golden decodes with DecodeEvent to its case's type and
// re-encodes to the same JSON: the payload types the runtime sends are the
// ones clients decode.
func TestWireGoldenEventsDecode(t *testing.T) {
	for typ, v := range wireEvents {
		data, err := os.ReadFile(filepath.Join("testdata", "golden", "event_"+typ+".json"))
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		got, err := DecodeEvent(typ, data)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if want := reflect.PointerTo(reflect.TypeOf(v)); reflect.TypeOf(got) != want {
			t.Errorf("%s decodes to %T, but its golden case is a %v", typ, got, want.Elem())
			continue
		}
		again, _ := json.MarshalIndent(got, "", "  ")
		if !bytes.Equal(append(again, '\n'), data) {
			t.Errorf("%s does not survive a decode and re-encode:\n%s", typ, again)
		}
	}
}

// Every exported Event* constant of events.go has a golden case, so that a
// new event type cannot ship without its JSON pinned.
func TestWireGoldenCoversEveryEvent(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !name.IsExported() || !strings.HasPrefix(name.Name, "Event") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s is not a string literal; this test reads event types from literals", name.Name)
					continue
				}
				typ, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				declared = append(declared, typ)
				if _, ok := wireEvents[typ]; !ok {
					t.Errorf("event constant %s (%q) has no golden case in wireEvents: add one", name.Name, typ)
				}
			}
		}
	}
	if len(declared) < 17 {
		t.Fatalf("found only %d Event* constants in events.go: %v", len(declared), declared)
	}
	for typ := range wireEvents {
		if !slices.Contains(declared, typ) {
			t.Errorf("golden case %q is no Event* constant of events.go", typ)
		}
	}
}
