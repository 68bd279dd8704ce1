package runtime

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gorap/gorap/internal/tracing"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
)

// receivedSpan is a span an OTLP receiver got, with the service.name of
// its resource.
type receivedSpan struct {
	service string
	*tracepb.Span
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes the
// ExportTraceServiceRequest protobuf bodies POSTed to /v1/traces.
type otlpReceiver struct {
	url      string
	mu       sync.Mutex
	spans    []receivedSpan
	requests int
	bad      []string // what was wrong with requests it could not take
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fail := func(status int, why string) {
			r.mu.Lock()
			r.bad = append(r.bad, why)
			r.mu.Unlock()
			http.Error(w, why, status)
		}
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			fail(http.StatusNotFound, req.Method+" "+req.URL.Path)
			return
		}
		if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			fail(http.StatusUnsupportedMediaType, "Content-Type "+ct)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				fail(http.StatusBadRequest, err.Error())
				return
			}
			body = zr
		}
		b, err := io.ReadAll(io.LimitReader(body, 16<<20))
		if err != nil {
			fail(http.StatusBadRequest, err.Error())
			return
		}
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			fail(http.StatusBadRequest, "decode: "+err.Error())
			return
		}
		r.mu.Lock()
		r.requests++
		for _, rs := range msg.GetResourceSpans() {
			service := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					r.spans = append(r.spans, receivedSpan{service, s})
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	r.url = srv.URL
	t.Cleanup(srv.Close)
	return r
}

// named returns the spans of service whose name starts with prefix.
func (r *otlpReceiver) named(service, prefix string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if s.service == service && strings.HasPrefix(s.GetName(), prefix) {
			out = append(out, s)
		}
	}
	return out
}

// await polls until cond holds, failing after waitFor.
func (r *otlpReceiver) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			r.mu.Lock()
			var names []string
			for _, s := range r.spans {
				names = append(names, s.service+": "+s.GetName())
			}
			bad := r.bad
			r.mu.Unlock()
			t.Fatalf("the receiver got no %s; spans: %s; refused requests: %v", what, strings.Join(names, ", "), bad)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func linked(s receivedSpan, to receivedSpan) bool {
	for _, l := range s.GetLinks() {
		if bytes.Equal(l.GetTraceId(), to.GetTraceId()) && bytes.Equal(l.GetSpanId(), to.GetSpanId()) {
			return true
		}
	}
	return false
}

// One tool call traced as users configure it, with the standard
// OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
// variables, exported over the OTLP/HTTP wire format to a receiver that
// decodes it, the runtime restarted while the tool runs: the completion
// and the dispatch share a trace; the tool server's span, exported by the
// tool server's own provider, is in that trace under the dispatch span;
// the callback's span, in the restarted runtime, is linked to the
// dispatch; the next completion is linked to the callback.
func TestTracesExportedOverOTLPHTTP(t *testing.T) {
	recv := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.url)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20") // export within 20 ms of a span's end
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(k, "")
	}
	provider := func(service string) *tracing.Provider {
		p, err := tracing.FromEnv(context.Background(), service, nil, nil)
		if err != nil || p == nil {
			t.Fatalf("tracing.FromEnv: %v, %v", p, err)
		}
		if p.Exporter != "otlp (http/protobuf)" {
			t.Fatalf("exporter %q, want otlp (http/protobuf)", p.Exporter)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			p.Shutdown(ctx)
		})
		return p
	}
	ts := newTracedToolServerWith(t, provider("greeter-tools"))
	tp := provider("rap-runtime")
	e := newEnv(t, envOptions{servers: []string{ts.url}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("greet", `{"name":"Ada Lovelace"}`)}},
		{Text: "{{last_result}}"},
	}, tweak: func(c *Config) { c.TracerProvider = tp }})
	th := e.newThread()
	e.post(th, "greet Ada")

	recv.await(t, "dispatch span", func() bool { return len(recv.named("rap-runtime", "execute_tool greet")) == 1 })
	e.restart() // the tool still runs: its callback reaches the new runtime
	close(ts.release)
	e.waitHistory(th, "the greeting", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "hello, Ada Lovelace") })
	recv.await(t, "second completion, callback and tool server spans", func() bool {
		return len(recv.named("rap-runtime", "chat ")) == 2 && len(recv.named("rap-runtime", "rap callback")) == 1 &&
			len(recv.named("greeter-tools", "execute_tool greet")) == 1
	})

	dispatch := recv.named("rap-runtime", "execute_tool greet")[0]
	if dispatch.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("dispatch span kind = %v, want client", dispatch.GetKind())
	}
	chats := recv.named("rap-runtime", "chat ")
	first, second := chats[0], chats[1]
	if first.GetStartTimeUnixNano() > second.GetStartTimeUnixNano() {
		first, second = second, first
	}
	if !bytes.Equal(first.GetTraceId(), dispatch.GetTraceId()) || !bytes.Equal(first.GetParentSpanId(), dispatch.GetParentSpanId()) {
		t.Errorf("the first completion (trace %x, parent %x) and the dispatch (trace %x, parent %x) are not in one slice",
			first.GetTraceId(), first.GetParentSpanId(), dispatch.GetTraceId(), dispatch.GetParentSpanId())
	}
	var slice bool
	for _, s := range recv.named("rap-runtime", "gorap slice") {
		slice = slice || bytes.Equal(s.GetSpanId(), dispatch.GetParentSpanId())
	}
	if !slice {
		t.Error("the dispatch span's parent is not an exported slice span")
	}

	handler := recv.named("greeter-tools", "execute_tool greet")[0]
	if !bytes.Equal(handler.GetTraceId(), dispatch.GetTraceId()) || !bytes.Equal(handler.GetParentSpanId(), dispatch.GetSpanId()) {
		t.Errorf("tool server span in trace %x under %x; want trace %x under the dispatch span %x",
			handler.GetTraceId(), handler.GetParentSpanId(), dispatch.GetTraceId(), dispatch.GetSpanId())
	}
	if handler.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("tool server span kind = %v, want server", handler.GetKind())
	}

	cb := recv.named("rap-runtime", "rap callback")[0]
	if bytes.Equal(cb.GetTraceId(), dispatch.GetTraceId()) {
		t.Error("the callback span is in the dispatch's trace; want a trace of its own, linked")
	}
	if !linked(cb, dispatch) {
		t.Errorf("callback span links = %v, want one to the dispatch span %x", cb.GetLinks(), dispatch.GetSpanId())
	}
	if !linked(second, cb) {
		t.Errorf("second completion links = %v, want one to the callback span %x", second.GetLinks(), cb.GetSpanId())
	}
	recv.mu.Lock()
	bad := recv.bad
	recv.mu.Unlock()
	if len(bad) != 0 {
		t.Errorf("the receiver refused requests: %v", bad)
	}
}
