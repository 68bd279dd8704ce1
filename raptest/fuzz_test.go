package raptest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gorap/gorap/rap"
)

// FuzzCallback posts arbitrary bodies to a call's callback URL: the
// endpoint never panics, answers 200 or a 4xx, and accepts only messages
// that belong to the call.
func FuzzCallback(f *testing.F) {
	for _, seed := range []string{
		`{"type":"tool_result","group_id":"g","id":"c","call_id":"k","text":"ok"}`,
		`{"type":"subscription_event","group_id":"g","tool_call_id":"c","text":"{}","final":true}`,
		`{"type":"user_choice","group_id":"g","id":"c","call_id":"k","prompt":"p","choices":["a"],"default":0,"response_url":"http://x/"}`,
		`{"type":"view_update","group_id":"g","view_type":"v","content":{}}`,
		`{"type":"oauth","group_id":"g","id":"c","call_id":"k","auth_url":"https://a/"}`,
		`{"type":"tool_result","group_id":"other","id":"c","text":"x"}`,
		`{"type":"tool_result","group_id":"g","id":"c","content":[{"type":"image","data":"AA==","mediaType":"image/png"}],"display_as":[{"type":"diff","content":{"path":"a","patch":"b"}}]}`,
		`[]`, `null`, ``, `{"type":`,
	} {
		f.Add([]byte(seed))
	}
	rt := NewRuntime(WithMaxCallbackBytes(1 << 16))
	defer rt.Close()
	f.Fuzz(func(t *testing.T, body []byte) {
		call := &Call{
			Invocation: rap.Invocation{ID: "c", CallID: "k", GroupID: "g", Operation: "op"},
			rt:         rt, token: "tok", changed: make(chan struct{}),
		}
		rt.mu.Lock()
		rt.calls["tok"] = call
		rt.mu.Unlock()
		req := httptest.NewRequest(http.MethodPost, callbackPrefix+"tok", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		rt.serveCallback(w, req)
		msgs := call.Messages()
		switch {
		case w.Code == http.StatusOK:
			if len(msgs) != 1 || msgs[0].Thread() != "g" {
				t.Fatalf("accepted %q but recorded %v", body, msgs)
			}
		case w.Code >= 400 && w.Code < 500:
			if len(msgs) != 0 {
				t.Fatalf("refused %q with %d but recorded it", body, w.Code)
			}
		default:
			t.Fatalf("status %d for %q", w.Code, body)
		}
	})
}
