package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The kit's toolset, as the runtime under test discovers it.
const (
	// ToolsetName is the name of the conformance toolset.
	ToolsetName = "conformance"
	// EchoTool records its invocation; the check then acts as the tool,
	// sending the callbacks it is checking.
	EchoTool = "conformance_echo"
	// WaitTool records its invocation and never answers on its own: the
	// checks of cancellation and timeouts call it.
	WaitTool = "conformance_wait"
)

// maxKitBody bounds what the kit reads of a request the runtime sends.
const maxKitBody = 1 << 20

// Received is one request the runtime under test sent to the kit.
type Received struct {
	// Kind says which endpoint: "discovery", "invoke", "cancel", "close",
	// "migrate" or "choice".
	Kind   string
	At     time.Time
	Header http.Header
	Body   []byte
	// Status is what the kit answered.
	Status int
	// Exchange is the request as a check shows it.
	Exchange Exchange
	// Invocation is the decoded body of an "invoke" request (nil when it
	// did not decode), and Step its arguments' step.
	Invocation *ReceivedInvocation
	Step       string
	// Fields is the decoded body of other requests, as JSON values.
	Fields map[string]any
}

// ReceivedInvocation is an invocation as the runtime sent it; raw members
// keep what was sent, so that a check can tell null from absent.
type ReceivedInvocation struct {
	Operation       string
	Arguments       map[string]any
	ID              string
	CallbackURL     string
	GroupID         string
	ThreadAncestors []string
	// Raw holds every member as sent.
	Raw map[string]json.RawMessage
}

// RuntimeKit is the conformance toolset a runtime under test is configured
// to use: it serves discovery at /.well-known/rap-toolset, its endpoint at
// /invoke, /cancel_tool_call, /close_thread, /migrate and the response URL
// of user choices, and records everything the runtime sends to it.
type RuntimeKit struct {
	url string
	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	received []Received
	changed  chan struct{}
	// refuse maps a step to the statuses the kit answers its next
	// invocations with, in order (then 200).
	refuse map[string][]int
}

// ListenRuntimeKit starts the conformance toolset on addr ("127.0.0.1:0"
// picks a free port) and returns it serving. Close stops it.
func ListenRuntimeKit(addr string) (*RuntimeKit, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the conformance toolset cannot listen on %s: %w (choose another address with --listen)", addr, err)
	}
	k := &RuntimeKit{ln: ln, changed: make(chan struct{}), refuse: make(map[string][]int)}
	k.url = "http://" + ln.Addr().String()
	k.srv = &http.Server{Handler: k, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	go func() { _ = k.srv.Serve(ln) }()
	return k, nil
}

// URL is the toolset's base URL, the one to configure the runtime with.
func (k *RuntimeKit) URL() string { return k.url }

// Close stops serving.
func (k *RuntimeKit) Close() error { return k.srv.Close() }

// Manifest returns the toolset's manifest (RAP TS-1).
func (k *RuntimeKit) Manifest() map[string]any {
	schema := map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"step": map[string]any{"type": "string", "description": "the conformance step named in the request"}},
		"required":             []string{"step"},
		"additionalProperties": false,
	}
	return map[string]any{
		"name":           ToolsetName,
		"description":    "The RAP conformance kit's toolset: its tools record how the runtime calls them.",
		"endpoint":       k.url + "/invoke",
		"needsMigration": true,
		"tools": []map[string]any{
			{"name": EchoTool, "description": "Conformance check: call it with the step you are asked to; it answers when the conformance kit says.", "inputSchema": schema},
			{"name": WaitTool, "description": "Conformance check: call it with the step you are asked to; it does not answer on its own.", "inputSchema": schema},
		},
	}
}

// ServeHTTP serves the toolset.
func (k *RuntimeKit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxKitBody))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	rec := Received{At: time.Now(), Header: r.Header.Clone(), Body: body, Status: http.StatusOK}
	var answer []byte
	switch {
	case r.URL.Path == "/.well-known/rap-toolset" && r.Method == http.MethodGet:
		rec.Kind = "discovery"
		answer, _ = json.Marshal(k.Manifest())
		w.Header().Set("Content-Type", "application/json")
	case r.Method != http.MethodPost:
		rec.Kind = "other"
		rec.Status = http.StatusMethodNotAllowed
	case r.URL.Path == "/invoke":
		rec.Kind = "invoke"
		rec.Invocation = decodeReceivedInvocation(body)
		if rec.Invocation != nil {
			rec.Step, _ = rec.Invocation.Arguments["step"].(string)
			rec.Status = k.nextStatus(rec.Step)
		}
	case r.URL.Path == "/cancel_tool_call":
		rec.Kind = "cancel"
	case r.URL.Path == "/close_thread":
		rec.Kind = "close"
	case r.URL.Path == "/migrate":
		rec.Kind = "migrate"
	case strings.HasPrefix(r.URL.Path, "/choice/"):
		rec.Kind = "choice"
		rec.Step = strings.TrimPrefix(r.URL.Path, "/choice/")
	default:
		rec.Kind = "other"
		rec.Status = http.StatusNotFound
	}
	if rec.Kind != "invoke" && rec.Kind != "discovery" {
		_ = json.Unmarshal(body, &rec.Fields)
	}
	rec.Exchange = ReceivedExchange(r, body, rec.Status)
	k.add(rec)
	w.WriteHeader(rec.Status)
	_, _ = w.Write(answer)
}

func decodeReceivedInvocation(body []byte) *ReceivedInvocation {
	var raw map[string]json.RawMessage
	if json.Unmarshal(body, &raw) != nil {
		return nil
	}
	inv := &ReceivedInvocation{Raw: raw}
	_ = json.Unmarshal(raw["operation"], &inv.Operation)
	_ = json.Unmarshal(raw["arguments"], &inv.Arguments)
	_ = json.Unmarshal(raw["id"], &inv.ID)
	_ = json.Unmarshal(raw["callback_url"], &inv.CallbackURL)
	_ = json.Unmarshal(raw["group_id"], &inv.GroupID)
	_ = json.Unmarshal(raw["thread_ancestors"], &inv.ThreadAncestors)
	return inv
}

// refuseNext makes the kit answer the next invocations of step with these
// statuses, one each, before it accepts them again.
func (k *RuntimeKit) refuseNext(step string, statuses ...int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.refuse[step] = append([]int(nil), statuses...)
}

func (k *RuntimeKit) nextStatus(step string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if q := k.refuse[step]; len(q) > 0 {
		k.refuse[step] = q[1:]
		return q[0]
	}
	return http.StatusOK
}

func (k *RuntimeKit) add(rec Received) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.received = append(k.received, rec)
	close(k.changed)
	k.changed = make(chan struct{})
}

// Received returns what the runtime sent so far, oldest first.
func (k *RuntimeKit) Received() []Received {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Received(nil), k.received...)
}

// mark returns a position in the record, to wait for what comes after it.
func (k *RuntimeKit) mark() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.received)
}

// errNotReceived says that the runtime did not send what was awaited.
var errNotReceived = errors.New("not received")

// await waits until a request received at or after position from matches,
// and returns it; it ends with errNotReceived when ctx ends first.
func (k *RuntimeKit) await(ctx context.Context, from int, match func(Received) bool) (Received, error) {
	ctx, cancel := nearDeadline(ctx)
	defer cancel()
	for {
		k.mu.Lock()
		for i := from; i < len(k.received); i++ {
			if match(k.received[i]) {
				rec := k.received[i]
				k.mu.Unlock()
				return rec, nil
			}
		}
		from = len(k.received)
		ch := k.changed
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Received{}, errNotReceived
		}
	}
}

// count returns how many requests received at or after from match.
func (k *RuntimeKit) count(from int, match func(Received) bool) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for i := from; i < len(k.received); i++ {
		if match(k.received[i]) {
			n++
		}
	}
	return n
}

// invocationOf matches the invocations of step.
func invocationOf(step string) func(Received) bool {
	return func(r Received) bool { return r.Kind == "invoke" && r.Step == step }
}

// nearDeadline returns a context that ends a little before ctx's deadline,
// so that a check waiting in vain ends with its own message rather than
// the suite's "did not finish in time".
func nearDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	reserve := min(time.Until(dl)/10, 2*time.Second)
	return context.WithDeadline(ctx, dl.Add(-reserve))
}
