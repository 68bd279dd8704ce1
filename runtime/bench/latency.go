package bench

// This file measures what the runtime adds to what a user waits for, with a
// model that answers at once: from a message POSTed to the client API to
// the first streamed word on the thread's event stream, and from a tool's
// result POSTed to the callback URL to the model request it causes.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// LatencyOptions configures RunLatency.
type LatencyOptions struct {
	// Threads is how many threads take turns at once; zero means 1.
	Threads int
	// Rounds is how many rounds each thread plays: a message answered in
	// text, then a message answered by a tool call whose result is sent
	// back; zero means 50.
	Rounds int
	// DataDir holds the SQLite store; empty means a temporary directory.
	DataDir string
	// Store, when set, is a postgres:// URL to run on instead of SQLite.
	Store string
	// Pause is the mean time a thread waits between its rounds, as a user
	// would (drawn at random from 0 to twice Pause, so that threads do not
	// move in step); zero plays rounds back to back, which measures the
	// runtime saturated rather than busy.
	Pause time.Duration
	// Timeout bounds the whole run; zero means five minutes.
	Timeout time.Duration
	// Stages, when set, records the runtime's spans (in memory) and breaks
	// the callback→model latency down by stage (LatencyReport.Stages).
	// Making the spans costs the runtime some time of its own.
	Stages bool
}

// LatencyReport is the outcome of RunLatency: two distributions, each
// from Threads × Rounds samples.
type LatencyReport struct {
	Threads, Rounds int
	Pause           time.Duration
	Store           string
	// FirstDelta is from the POST of a user message to /v1 to the first
	// text_delta event of its answer on the thread's event stream.
	FirstDelta Distribution
	// CallbackToModel is from the POST of a tool result to the runtime's
	// callback URL to the start of the model request that carries it.
	CallbackToModel Distribution
	// Stages, with LatencyOptions.Stages, break CallbackToModel down.
	Stages []Stage
}

// Distribution summarises latency samples.
type Distribution struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

func distribution(lat []time.Duration) Distribution {
	p50, p90, p99, max := percentiles(lat)
	return Distribution{N: len(lat), P50: p50, P90: p90, P99: p99, Max: max}
}

func (d Distribution) String() string {
	return fmt.Sprintf("p50 %v  p90 %v  p99 %v  max %v  (%d samples)", d.P50.Round(time.Microsecond), d.P90.Round(time.Microsecond),
		d.P99.Round(time.Microsecond), d.Max.Round(time.Microsecond), d.N)
}

// String formats the report as a small table.
func (r *LatencyReport) String() string {
	return fmt.Sprintf("store               %s\nthreads             %d\nrounds              %d (mean pause between rounds %v)\nmessage→first word  %s\ncallback→model      %s\n",
		r.Store, r.Threads, r.Rounds, r.Pause, r.FirstDelta, r.CallbackToModel) + stagesString(r.Stages)
}

// latencyModel answers at once: a message "tool" with a call of the tool
// "work", a tool result (after noting when its request started) and any
// other message with one streamed word.
type latencyModel struct {
	ids     atomic.Int64
	mu      sync.Mutex
	started map[string]time.Time // call id → when the request with its result started
}

func (m *latencyModel) Name() string { return "instant (latency)" }

func (m *latencyModel) SupportsImages() bool { return false }

func (m *latencyModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	now := time.Now()
	if len(req.Messages) == 0 {
		return nil, errors.New("latency model: empty request")
	}
	last := req.Messages[len(req.Messages)-1]
	if len(last.ToolResults) > 0 {
		m.mu.Lock()
		for _, r := range last.ToolResults {
			if _, ok := m.started[r.CallID]; !ok {
				m.started[r.CallID] = now
			}
		}
		m.mu.Unlock()
		return &model.Response{Text: "done", StopReason: "end_turn"}, nil
	}
	if last.Text == "tool" {
		id := "lat_" + strconv.FormatInt(m.ids.Add(1), 10)
		return &model.Response{ToolCalls: []model.ToolCall{{ID: id, Name: "work", Arguments: json.RawMessage(`{}`)}}, StopReason: "tool_use"}, nil
	}
	if s != nil {
		s.TextDelta("ok")
	}
	return &model.Response{Text: "ok", StopReason: "end_turn"}, nil
}

// latencyTool is a RAP tool server with the tool "work": it acknowledges
// each invocation, then POSTs its result and notes when it did.
type latencyTool struct {
	client *http.Client
	mu     sync.Mutex
	posted map[string]time.Time // call id → when its result was POSTed
}

func (l *latencyTool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"name":"latency","endpoint":"http://`+r.Host+`/invoke","tools":[{"name":"work","description":"Answers at once.","inputSchema":{"type":"object","additionalProperties":false}}]}`)
		return
	}
	if r.URL.Path != "/invoke" {
		w.WriteHeader(http.StatusOK) // close_thread, cancel_tool_call
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	inv, err := rap.DecodeInvocation(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
	go func() {
		res, _ := json.Marshal(map[string]any{"type": "tool_result", "group_id": inv.GroupID, "id": inv.ID, "call_id": inv.CallID, "text": "worked"})
		// The model knows the call by its own id: the invocation's call_id
		// when the runtime sent one, else its id.
		key := inv.CallID
		if key == "" {
			key = inv.ID
		}
		l.mu.Lock()
		l.posted[key] = time.Now()
		l.mu.Unlock()
		resp, err := l.client.Post(inv.CallbackURL, "application/json", bytes.NewReader(res))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
}

// RunLatency measures what the runtime adds to a user's wait, with a model
// that answers at once and a tool that answers at once: Threads threads
// each play Rounds rounds concurrently, every round a message answered
// with a word, then a message answered through a tool call.
func RunLatency(ctx context.Context, opts LatencyOptions) (*LatencyReport, error) {
	if opts.Threads <= 0 {
		opts.Threads = 1
	}
	if opts.Rounds <= 0 {
		opts.Rounds = 50
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: 1024}
	defer tr.CloseIdleConnections()
	tool := &latencyTool{client: &http.Client{Transport: tr}, posted: map[string]time.Time{}}
	toolSrv := httptest.NewServer(tool)
	defer toolSrv.Close()
	mdl := &latencyModel{started: map[string]time.Time{}}
	var obs observers
	var rec *tracetest.SpanRecorder
	if opts.Stages {
		rec = tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		defer tp.Shutdown(context.WithoutCancel(ctx))
		obs.tp = tp
	}
	e, err := newEnv(ctx, opts.DataDir, opts.Store, nil, nil, toolSrv.URL, mdl, obs)
	if err != nil {
		return nil, err
	}
	defer e.close()
	c, err := client.New(e.base, client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return nil, err
	}
	rep := &LatencyReport{Threads: opts.Threads, Rounds: opts.Rounds, Pause: opts.Pause, Store: "SQLite"}
	if opts.Store != "" {
		rep.Store = "PostgreSQL"
	}
	var mu sync.Mutex
	var firstDelta []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	for range opts.Threads {
		wg.Go(func() {
			lat, err := playRounds(ctx, c, opts.Rounds, opts.Pause)
			mu.Lock()
			firstDelta = append(firstDelta, lat...)
			if err != nil && firstErr == nil {
				firstErr = err
				cancel()
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	rep.FirstDelta = distribution(firstDelta)
	var cb []time.Duration
	tool.mu.Lock()
	mdl.mu.Lock()
	for id, posted := range tool.posted {
		if started, ok := mdl.started[id]; ok {
			cb = append(cb, started.Sub(posted))
		}
	}
	mdl.mu.Unlock()
	tool.mu.Unlock()
	if len(cb) != opts.Threads*opts.Rounds {
		return nil, fmt.Errorf("%d of %d tool results reached the model", len(cb), opts.Threads*opts.Rounds)
	}
	rep.CallbackToModel = distribution(cb)
	if rec != nil {
		tool.mu.Lock()
		mdl.mu.Lock()
		rep.Stages = stageBreakdown(rec.Ended(), tool.posted, mdl.started)
		mdl.mu.Unlock()
		tool.mu.Unlock()
	}
	return rep, nil
}

// playRounds plays rounds on a new thread and returns, for each round, the
// time from its text message's POST to the first text_delta.
func playRounds(ctx context.Context, c *client.Client, rounds int, pause time.Duration) ([]time.Duration, error) {
	th, err := c.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		return nil, err
	}
	st, err := c.Events(ctx, th.ID, client.StreamOptions{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var lat []time.Duration
	for range rounds {
		if pause > 0 {
			if err := sleep(ctx, rand.N(2*pause)); err != nil {
				return lat, err
			}
		}
		sent := time.Now()
		if _, err := c.PostMessage(ctx, th.ID, "hi"); err != nil {
			return lat, err
		}
		if err := nextEvent(st, api.EventTextDelta); err != nil {
			return lat, err
		}
		lat = append(lat, time.Since(sent))
		if err := nextEvent(st, api.EventTurnEnded); err != nil {
			return lat, err
		}
		if _, err := c.PostMessage(ctx, th.ID, "tool"); err != nil {
			return lat, err
		}
		// The tool's result and the model's answer to it end the turn.
		if err := nextEvent(st, api.EventToolResult); err != nil {
			return lat, err
		}
		if err := nextEvent(st, api.EventTurnEnded); err != nil {
			return lat, err
		}
	}
	return lat, nil
}

// nextEvent reads the stream up to the next event of type typ.
func nextEvent(st *client.Stream, typ string) error {
	for {
		ev, err := st.Next()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", typ, err)
		}
		if ev.Type == typ {
			return nil
		}
	}
}
