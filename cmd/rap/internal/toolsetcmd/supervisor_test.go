package toolsetcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/config"
)

// A program that runs but never prints its port is
// reported, naming the contract, and killed with its process group once
// the start timeout passes.
func TestCommandStartTimeout(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep program")
	}
	old := StartTimeout
	StartTimeout = 300 * time.Millisecond
	t.Cleanup(func() { StartTimeout = old })
	sup := New(config.ToolSet{Source: "rap.json: tool_sets[0]", Command: &config.ToolsetCommand{Name: "quiet", Argv: []string{sleep, "60"}}}, t.TempDir(), slog.New(slog.DiscardHandler))
	err = sup.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `printed no {"port": N} line within 300ms`) {
		t.Fatalf("start error = %v, want the missing port line named", err)
	}
	if sup.proc != nil {
		t.Errorf("a program that never reported its port must not be kept")
	}
}

// The port line is the reference runtime's JSON object; anything else is
// not taken for it.
func TestParsePortLine(t *testing.T) {
	for line, want := range map[string]int{`{"port": 4242}`: 4242, ` {"port":1} `: 1, `{"port": 0}`: 0, `{"port": 70000}`: 0, `listening on 4242`: 0, `{"addr": 3}`: 0, `{"port": "80"}`: 0} {
		got, ok := ParsePortLine(line)
		if ok != (want != 0) || got != want {
			t.Errorf("ParsePortLine(%q) = %d, %v; want %d", line, got, ok, want)
		}
	}
}

// The stable name forwards to the program's current
// port with the runtime's bearer token; a manifest whose endpoint names
// the program's own loopback port is rewritten to the stable name; while
// the program is down the name answers 503.
func TestCommandProxy(t *testing.T) {
	var gotAuth, gotHost string
	var port string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotHost = r.Header.Get("Authorization"), r.Host
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"name":"x","endpoint":"http://127.0.0.1:%s/invoke","tools":[]}`, port)
	}))
	defer ts.Close()
	u, _ := url.Parse(ts.URL)
	port = u.Port()
	sup := &Supervisor{name: "x", host: "x.cmd.rap.invalid", log: slog.New(slog.DiscardHandler)}
	h := sup.Proxy("tok")

	get := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "http://x.cmd.rap.invalid"+rap.WellKnownPath, nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := get(); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("while down: status %d, want 503", rec.Code)
	}
	n, _ := strconv.Atoi(port)
	sup.port.Store(int32(n))
	rec := get()
	var m struct {
		Endpoint string `json:"endpoint"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("status %d, body %s: %v", rec.Code, rec.Body, err)
	}
	if m.Endpoint != "http://x.cmd.rap.invalid/invoke" {
		t.Errorf("endpoint = %q, want it on the stable name", m.Endpoint)
	}
	if gotAuth != "Bearer tok" || gotHost != "x.cmd.rap.invalid" {
		t.Errorf("program got Authorization %q and Host %q", gotAuth, gotHost)
	}
}
