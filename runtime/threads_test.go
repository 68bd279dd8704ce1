package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// fnModel is a model.Provider whose replies a test computes from the
// request, for conversations that need ids only known at run time.
type fnModel struct {
	fn func(req model.Request) *model.Response
	n  atomic.Int64
}

func (f *fnModel) Name() string         { return "test function model" }
func (f *fnModel) SupportsImages() bool { return false }
func (f *fnModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := f.n.Add(1)
	resp := f.fn(req)
	if resp == nil {
		resp = &model.Response{Text: "nothing to do"}
	}
	for i := range resp.ToolCalls {
		if resp.ToolCalls[i].ID == "" {
			resp.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", n, i)
		}
	}
	if resp.Text != "" && s != nil {
		s.TextDelta(resp.Text)
	}
	return resp, nil
}

// lastInput describes the end of a request: the last user text (if the
// last message carries text) and the last tool result with its tool name.
type lastInput struct {
	user       string
	result     string
	resultName string
}

func inputOfReq(req model.Request) lastInput {
	names := map[string]string{}
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
		}
	}
	var in lastInput
	if len(req.Messages) == 0 {
		return in
	}
	m := req.Messages[len(req.Messages)-1]
	if m.Role != model.RoleUser {
		return in
	}
	in.user = m.Text
	if n := len(m.ToolResults); n > 0 {
		in.result = m.ToolResults[n-1].Text
		in.resultName = names[m.ToolResults[n-1].CallID]
	}
	return in
}

func toolCall(name string, args any) model.ToolCall {
	b, _ := json.Marshal(args)
	return model.ToolCall{Name: name, Arguments: b}
}

var (
	eventThreadRe = regexp.MustCompile(`This thread \(([^)]+)\) was started`)
	spawnedRe     = regexp.MustCompile(`Your thread id is (\S+) and your thread stack is (\[[^\]]*\])`)
)

// eventAgent is the behaviour of the agent in the subscription tests: the
// user asks it to subscribe; an event thread closes itself with a short
// report that never repeats the event's text; the root notes reports and
// inline events.
func eventAgent(subscribeArgs func(user string) (string, any)) func(req model.Request) *model.Response {
	return func(req model.Request) *model.Response {
		in := inputOfReq(req)
		if m := eventThreadRe.FindStringSubmatch(in.user); m != nil {
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinCloseThread,
				map[string]string{"thread_id": m[1], "report_to_parent": "handled one event"})}}
		}
		if strings.HasPrefix(in.user, "subscribe") {
			name, args := subscribeArgs(in.user)
			return &model.Response{Text: "subscribing", ToolCalls: []model.ToolCall{toolCall(name, args)}}
		}
		switch in.resultName {
		case InjectedToolName:
			return &model.Response{Text: "noted"}
		case BuiltinSleepUntilEventOrUser, BuiltinCloseThread:
			return nil
		}
		if strings.Contains(in.result, "subscri") {
			return &model.Response{Text: "waiting for events", ToolCalls: []model.ToolCall{toolCall(BuiltinSleepUntilEventOrUser, map[string]any{})}}
		}
		return &model.Response{Text: "ok"}
	}
}

// eventSource is a RAP tool server built with the SDK whose subscription
// tool "watch" emits, for each topic, the events the test pushes.
type eventSource struct {
	t      testing.TB
	srv    *rap.Server
	url    string
	mu     sync.Mutex
	topics map[string]chan sourceEvent
	closes chan string // thread ids of /close_thread requests
	cancel chan rap.CancelToolCallRequest
}

type sourceEvent struct {
	text        string
	associative bool
	final       bool
}

func newEventSource(t testing.TB, name string) *eventSource {
	s := &eventSource{t: t, topics: map[string]chan sourceEvent{}, closes: make(chan string, 4096), cancel: make(chan rap.CancelToolCallRequest, 4096)}
	s.srv = rap.NewServer(name, &rap.ServerOptions{Workers: 256, Logger: discardLogger()})
	type in struct {
		Topic string `json:"topic"`
	}
	rap.AddSubscription(s.srv, &rap.Tool{Name: "watch_" + name, Description: "events of a topic"}, func(ctx context.Context, sub *rap.Subscription, a in) error {
		ch := s.topic(a.Topic)
		for {
			select {
			case <-ctx.Done():
				return nil
			case ev := <-ch:
				var err error
				switch {
				case ev.final:
					err = sub.Final(ctx, ev.text, ev.associative)
				case ev.associative:
					err = sub.EmitAssociative(ctx, ev.text)
				default:
					err = sub.Emit(ctx, ev.text)
				}
				if err != nil {
					t.Errorf("emit %q: %v", ev.text, err)
				}
				if ev.final {
					return nil
				}
			}
		}
	})
	if err := s.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case rap.CloseThreadPath, rap.CancelToolCallPath:
			body, _ := io.ReadAll(r.Body)
			if r.URL.Path == rap.CloseThreadPath {
				if req, err := rap.DecodeCloseThread(body); err == nil {
					s.closes <- req.ThreadID
				}
			} else if req, err := rap.DecodeCancelToolCall(body); err == nil {
				s.cancel <- *req
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		s.srv.ServeHTTP(w, r)
	}))
	s.url = hs.URL
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		s.srv.Shutdown(ctx)
		hs.Close()
	})
	return s
}

func (s *eventSource) topic(name string) chan sourceEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.topics[name]
	if ch == nil {
		ch = make(chan sourceEvent, 1024)
		s.topics[name] = ch
	}
	return ch
}

func (s *eventSource) push(topic string, evs ...sourceEvent) {
	for _, ev := range evs {
		s.topic(topic) <- ev
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// children returns the child threads of parent, as stored.
func (e *env) children(parent string) []store.Thread {
	e.t.Helper()
	var all []store.Thread
	err := e.rt.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		all, err = tx.ListThreads()
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []store.Thread
	for _, th := range all {
		if th.ParentID == parent {
			out = append(out, th)
		}
	}
	return out
}

func (e *env) thread(id string) store.Thread {
	e.t.Helper()
	var th store.Thread
	if err := e.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		th, err = tx.Thread(id)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return th
}

// poll waits until cond holds.
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func injected(h []store.Message) (calls []store.ToolCall, results []store.ToolResult) {
	for _, m := range h {
		for _, c := range m.ToolCalls {
			if c.Name == InjectedToolName {
				calls = append(calls, c)
			}
		}
		for _, r := range m.ToolResults {
			if r.Name == InjectedToolName {
				results = append(results, r)
			}
		}
	}
	return calls, results
}

// RAP SU-3, SU-5, SU-6, BT-3, BT-4, TC-1: each non-associative event wakes
// the agent in a child thread that inherits the parent's history, sees the
// event as a synthetic call of the reserved tool tied to the subscribing
// call, and closes itself with a report; the parent sees only the report.
// An associative event is injected inline in the parent.
func TestSU6ThreadedAndInlineEvents(t *testing.T) {
	src := newEventSource(t, "feed")
	e := newEnv(t, envOptions{servers: []string{src.url}, model: &fnModel{fn: eventAgent(func(string) (string, any) {
		return "watch_feed", map[string]string{"topic": "news"}
	})}})
	root := e.newThread()
	e.post(root, "subscribe to the news")
	var subID string
	poll(t, "an active subscription", func() bool {
		var subs []store.Subscription
		e.st.View(context.Background(), func(tx store.Tx) error {
			var err error
			subs, err = tx.ThreadSubscriptions(root)
			return err
		})
		if len(subs) == 1 && subs[0].State == store.SubscriptionActive {
			subID = subs[0].CallID
			return true
		}
		return false
	})
	e.idle(root)
	prefix := len(e.history(root))
	src.push("news", sourceEvent{text: `{"headline":"RAW-ONE"}`}, sourceEvent{text: `{"headline":"RAW-TWO"}`},
		sourceEvent{text: `{"progress":"INLINE-50%"}`, associative: true})

	e.waitHistory(root, "two reports and one inline event", func(h []store.Message) bool {
		_, res := injected(h)
		return len(res) == 3
	})
	e.idle(root)
	h := e.history(root)
	calls, res := injected(h)
	var reports, inline int
	for i, r := range res {
		var args struct {
			Tool string          `json:"original_tool_name"`
			ID   string          `json:"original_tool_call_id"`
			Args json.RawMessage `json:"original_args"`
		}
		if err := json.Unmarshal(calls[i].Arguments, &args); err != nil || args.Tool != "watch_feed" || args.ID != subID || !strings.Contains(string(args.Args), "news") {
			t.Fatalf("injected call arguments %s: want the subscribing call's name, id and args (RAP SU-5, BT-3)", calls[i].Arguments)
		}
		switch {
		case strings.Contains(r.Text, "handled one event"):
			reports++
		case strings.Contains(r.Text, "INLINE-50%"):
			inline++
		}
	}
	if reports != 2 || inline != 1 {
		t.Fatalf("parent got %d reports and %d inline events, want 2 and 1:\n%s", reports, inline, dump(h))
	}
	if d := dump(h); strings.Contains(d, "RAW-ONE") || strings.Contains(d, "RAW-TWO") {
		t.Fatalf("raw text of threaded events reached the parent (RAP SU-6):\n%s", d)
	}
	kids := e.children(root)
	if len(kids) != 2 {
		t.Fatalf("%d child threads, want one per non-associative event", len(kids))
	}
	seen := map[string]bool{}
	for _, k := range kids {
		if k.Status != store.ThreadClosed || k.OriginCallID != subID || k.RootID != root {
			t.Fatalf("child %+v: want closed, tied to subscription %s, in session %s", k, subID, root)
		}
		kh := e.history(k.ID)
		if len(kh) < prefix || fmt.Sprint(kh[0].Text) != "subscribe to the news" {
			t.Fatalf("child %s does not start with the parent's history:\n%s", k.ID, dump(kh))
		}
		// Its own event is the last injected one; before it, it may have
		// inherited reports of earlier children, never their raw events.
		_, kres := injected(kh)
		if len(kres) == 0 || strings.Count(dump(kh), "RAW-") != 1 {
			t.Fatalf("child %s: want exactly its own event:\n%s", k.ID, dump(kh))
		}
		seen[kres[len(kres)-1].Text] = true
		if strings.Contains(dump(kh), "INLINE-50%") {
			t.Fatalf("child %s saw the parent's later messages", k.ID)
		}
	}
	if !seen[`{"headline":"RAW-ONE"}`] || !seen[`{"headline":"RAW-TWO"}`] {
		t.Fatalf("events seen by children = %v", seen)
	}
	// RAP TC-1: each closed child was announced to the tool server.
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case id := <-src.closes:
			got[id] = true
		case <-time.After(waitFor):
			t.Fatalf("close_thread reached the tool server for %v only (RAP TC-1)", got)
		}
	}
	for _, k := range kids {
		if !got[k.ID] {
			t.Fatalf("no close_thread for child %s (RAP TC-1)", k.ID)
		}
	}
}
