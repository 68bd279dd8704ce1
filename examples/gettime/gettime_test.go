package gettime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/display"
	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
	"github.com/gorap/gorap/raptest"
)

// serve starts the gettime server on a loopback port and a fake runtime.
func serve(t *testing.T) (context.Context, string, *raptest.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s := gettime.New(&rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	rt := raptest.NewRuntime()
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		if err := s.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		srv.Close()
		rt.Close()
	})
	return ctx, srv.URL, rt
}

func noErrors(t *testing.T, rt *raptest.Runtime) {
	t.Helper()
	if errs := rt.Errors(); len(errs) > 0 {
		t.Errorf("the tool sent bad callbacks: %v", errs)
	}
}

func TestManifest(t *testing.T) {
	ctx, url, rt := serve(t)
	ts, err := rt.Discover(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Name != gettime.Name || len(ts.Tools) != 3 {
		t.Fatalf("toolset %q with %d tools", ts.Name, len(ts.Tools))
	}
	for _, tool := range ts.Tools {
		if tool.DisplayScript == "" || tool.Description == "" {
			t.Errorf("tool %s lacks a description or displayScript", tool.Name)
		}
		if tool.Name == "get_current_time" {
			// RAP TS-8: a tool without parameters declares exactly this.
			var got bytes.Buffer
			json.Compact(&got, tool.InputSchema)
			if got.String() != `{"type":"object","additionalProperties":false}` {
				t.Errorf("get_current_time inputSchema = %s", got.String())
			}
		}
	}
	// RAP DS-1, DS-2: each display script renders, instead of failing over
	// to the default tool_name(args).
	want := map[string][2]string{
		"get_current_time": {`{}`, "Checking the time"},
		"get_time_in_zone": {`{"timezone":"Asia/Tokyo"}`, "Time in Asia/Tokyo"},
		"subscribe_clock":  {`{"interval_seconds":5,"count":3}`, "Clock every 5s, 3 ticks"},
	}
	for _, tool := range ts.Tools {
		w := want[tool.Name]
		if got := display.Render(ctx, tool.Name, tool.DisplayScript, json.RawMessage(w[0])); got != w[1] {
			t.Errorf("display of %s%s = %q, want %q", tool.Name, w[0], got, w[1])
		}
	}
	if ws := ts.Warnings(); len(ws) != 0 {
		t.Errorf("manifest warnings: %v", ws)
	}
}

func TestCurrentTime(t *testing.T) {
	ctx, url, rt := serve(t)
	before := time.Now().Add(-time.Second)
	call, err := rt.Invoke(ctx, url, "get_current_time", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := time.Parse(time.RFC3339, res.Text)
	if err != nil {
		t.Fatalf("result %q is not RFC 3339: %v", res.Text, err)
	}
	if got.Before(before) || got.After(time.Now().Add(time.Second)) {
		t.Errorf("time %v is not now", got)
	}
	noErrors(t, rt)
}

func TestTimeInZone(t *testing.T) {
	ctx, url, rt := serve(t)
	tests := []struct {
		zone      string
		wantParts []string
	}{
		{"Asia/Tokyo", []string{"+09:00", "Asia/Tokyo", "JST"}},
		{"UTC", []string{"Z (UTC"}},
		{"America/Argentina/Buenos_Aires", []string{"-03:00"}},
	}
	for _, tc := range tests {
		call, err := rt.Invoke(ctx, url, "get_time_in_zone", map[string]string{"timezone": tc.zone})
		if err != nil {
			t.Fatal(err)
		}
		res, err := call.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stamp, _, _ := strings.Cut(res.Text, " ")
		if _, err := time.Parse(time.RFC3339, stamp); err != nil {
			t.Errorf("%s: %q does not start with an RFC 3339 time", tc.zone, res.Text)
		}
		for _, p := range tc.wantParts {
			if !strings.Contains(res.Text, p) {
				t.Errorf("%s: %q lacks %q", tc.zone, res.Text, p)
			}
		}
	}
	noErrors(t, rt)
}

// RAP RE-4: a bad zone is an ordinary result starting "Error: " that says
// what a valid value looks like.
func TestTimeInZoneErrors(t *testing.T) {
	ctx, url, rt := serve(t)
	for _, zone := range []string{"Mars/Olympus_Mons", "../../etc/passwd", "Local", "europe paris"} {
		call, err := rt.Invoke(ctx, url, "get_time_in_zone", map[string]string{"timezone": zone})
		if err != nil {
			t.Fatal(err)
		}
		res, err := call.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "Europe/Paris") {
			t.Errorf("%q: result %q", zone, res.Text)
		}
	}
	noErrors(t, rt)
}

// RAP IN-3: invalid arguments and unknown operations are acknowledged and
// answered with an error result.
func TestInvalidCalls(t *testing.T) {
	ctx, url, rt := serve(t)
	tests := []struct {
		op   string
		args any
		want string
	}{
		{"get_time_in_zone", map[string]any{}, "timezone"},
		{"get_current_time", map[string]any{"zone": "UTC"}, "zone"},
		{"subscribe_clock", map[string]any{"interval_seconds": 0.001}, "interval_seconds"},
		{"subscribe_clock", map[string]any{"interval_seconds": 1, "count": 0}, "count"},
		{"get_weather", map[string]any{}, "get_weather"},
	}
	for _, tc := range tests {
		call, err := rt.Invoke(ctx, url, tc.op, tc.args, raptest.Unchecked())
		if err != nil {
			t.Fatal(err)
		}
		res, err := call.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, tc.want) || res.Subscription {
			t.Errorf("%s %v: result %+v, want an error naming %q", tc.op, tc.args, res, tc.want)
		}
	}
	noErrors(t, rt)
}

// RAP SU-1, SU-2, SU-4: the clock confirms, ticks count times, and the last
// tick is final.
func TestClockWithCount(t *testing.T) {
	ctx, url, rt := serve(t)
	call, err := rt.Invoke(ctx, url, "subscribe_clock", map[string]any{"interval_seconds": 0.1, "count": 3})
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Subscription || !strings.Contains(res.Text, call.Invocation.ID) {
		t.Errorf("confirmation = %+v; want subscription:true naming the id", res)
	}
	evs, err := call.Events(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for i, ev := range evs {
		var tick gettime.Tick
		if err := json.Unmarshal([]byte(ev.Text), &tick); err != nil {
			t.Fatalf("event %d text %q is not JSON: %v", i, ev.Text, err)
		}
		at, err := time.Parse(time.RFC3339Nano, tick.Time)
		if err != nil || tick.N != i+1 || !at.After(last) {
			t.Errorf("event %d = %+v (%v)", i, tick, err)
		}
		last = at
		if ev.Final != (i == 2) || ev.ToolCallID != call.Invocation.ID {
			t.Errorf("event %d: final=%v tool_call_id=%s", i, ev.Final, ev.ToolCallID)
		}
	}
	noErrors(t, rt)
}

// RAP CA-1: a cancelled clock stops ticking.
func TestClockCancel(t *testing.T) {
	ctx, url, rt := serve(t)
	call, err := rt.Invoke(ctx, url, "subscribe_clock", map[string]any{"interval_seconds": 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call.Events(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := call.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	// The server answers the cancel before it stops the handler, and
	// events queued before that are still delivered, so a few may arrive
	// after Cancel returned, later still on a loaded machine. A stopped
	// clock falls quiet: no message for a second, while a running one
	// ticks every 100 ms.
	const quiet = time.Second
	n, since := len(call.Messages()), time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Since(since) < quiet; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the clock still ticks 20 s after the cancellation: %d messages", len(call.Messages()))
		}
		if m := len(call.Messages()); m != n {
			n, since = m, time.Now()
		}
	}
	noErrors(t, rt)
}

// With a durable store, a clock subscription survives a restart of the
// tool server and carries on counting from its saved state (RAP SU-1).
func TestClockResumesAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := filepath.Join(t.TempDir(), "gettime.db")
	rt := raptest.NewRuntime()
	defer rt.Close()
	start := func() (*rap.Server, *httptest.Server, *durable.Store) {
		store, err := durable.Open(db)
		if err != nil {
			t.Fatal(err)
		}
		s := gettime.New(&rap.ServerOptions{Logger: slog.New(slog.DiscardHandler), Store: store})
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return s, httptest.NewServer(s), store
	}
	stop := func(s *rap.Server, srv *httptest.Server, store *durable.Store) {
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		store.Close()
	}

	s1, srv1, store1 := start()
	call, err := rt.Invoke(ctx, srv1.URL, "subscribe_clock", map[string]any{"interval_seconds": 0.2, "count": 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call.Events(ctx, 1); err != nil {
		t.Fatal(err)
	}
	stop(s1, srv1, store1)
	s2, srv2, store2 := start() // resumes the stored subscription
	defer stop(s2, srv2, store2)

	var ns []int
	for {
		evs, err := call.Events(ctx, 1)
		if err != nil {
			t.Fatalf("after ticks %v: %v", ns, err)
		}
		var tick gettime.Tick
		json.Unmarshal([]byte(evs[0].Text), &tick)
		ns = append(ns, tick.N)
		if evs[0].Final {
			break
		}
	}
	all := append([]int{1}, ns...)
	for i, n := range all {
		if n != i+1 {
			t.Fatalf("ticks across the restart = %v, want 1 to 5 once each", all)
		}
	}
	if len(all) != 5 {
		t.Fatalf("ticks = %v, want 5", all)
	}
	noErrors(t, rt)
}
