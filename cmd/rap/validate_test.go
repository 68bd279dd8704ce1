package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/gettime"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/config"
)

// runVerb runs the rap command in-process and returns its exit status and
// output.
func runVerb(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// serveGettime serves the gettime example over loopback HTTP. The handler
// wrapper, when not nil, sees every request first.
func serveGettime(t *testing.T, opts *rap.ServerOptions) *httptest.Server {
	t.Helper()
	if opts == nil {
		opts = &rap.ServerOptions{}
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	s := gettime.New(opts)
	srv := serveToolServer(t, s)
	return srv
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// RAP TS-1, TS-2, TS-5: every violation is printed with its path, and the
// status is 1.
func TestValidateFileWithThreeViolations(t *testing.T) {
	p := writeFile(t, "bad.json", `{"name": "", "endpoint": "not a url",
		"tools": [{"name": "get time", "description": "d", "inputSchema": {"type": "object"}}]}`)
	code, out, _ := runVerb(t, context.Background(), "validate", p)
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	var errs []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "error: ") {
			errs = append(errs, line)
		}
	}
	if len(errs) != 3 {
		t.Fatalf("%d error lines, want 3:\n%s", len(errs), out)
	}
	for i, path := range []string{"error: name: ", "error: endpoint: ", "error: tools[0].name: "} {
		if !strings.HasPrefix(errs[i], path) {
			t.Errorf("line %d = %q, want it to start with %q", i, errs[i], path)
		}
	}
	if !strings.Contains(out, "FAIL: "+p+" has 3 violations") {
		t.Errorf("no FAIL summary:\n%s", out)
	}
}

func TestValidateFileWithWarnings(t *testing.T) {
	p := writeFile(t, "ok.json", `{"name": "t", "endpoint": "http://127.0.0.1:1/",
		"tools": [{"name": "a", "description": "d", "inputSchema": {"type": "object"}},
		          {"name": "b", "description": "d", "inputSchema": {"type": "object", "additionalProperties": false}}]}`)
	code, out, _ := runVerb(t, context.Background(), "validate", p)
	if code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if !strings.Contains(out, "warning: tools[0].inputSchema: ") || !strings.Contains(out, "OK: toolset \"t\" with 2 tools (1 warning)\nsha256: ") {
		t.Errorf("output:\n%s", out)
	}
}

// RAP TS-4: a URL is a base URL; the manifest comes from the well-known path.
func TestValidateURL(t *testing.T) {
	srv := serveGettime(t, nil)
	for _, u := range []string{srv.URL, srv.URL + "/", srv.URL + rap.WellKnownPath} {
		code, out, errOut := runVerb(t, context.Background(), "validate", u)
		if code != 0 || !strings.HasPrefix(out, "OK: toolset \"gettime\" with 3 tools\nsha256: ") {
			t.Errorf("%s: status %d, output %q %q", u, code, out, errOut)
		}
	}
}

// RAP TS-11: validate prints the manifest's digest, the one a runtime
// computes (rap.ToolsetDigest), and the config entry that pins it.
func TestValidatePrintsThePinnedDigest(t *testing.T) {
	srv := serveGettime(t, nil)
	_, raw, err := rap.FetchToolset(context.Background(), nil, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	want, err := rap.ToolsetDigest(raw)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runVerb(t, context.Background(), "validate", srv.URL+"/")
	if code != 0 {
		t.Fatalf("status %d: %s %s", code, out, errOut)
	}
	if !strings.Contains(out, "\nsha256: "+want+" (of its RFC 8785 canonical form)\n") {
		t.Errorf("output lacks the digest %s:\n%s", want, out)
	}
	entry := `{"type":"toolset_server","server_url":"` + srv.URL + `","sha256":"` + want + `"}`
	if !strings.Contains(out, entry) {
		t.Errorf("output lacks the config entry %s:\n%s", entry, out)
	}
	// The printed entry is a valid config entry that pins this digest.
	f, err := config.Parse([]byte(`{"tool_sets": [`+entry+`]}`), "rap.json")
	if err != nil {
		t.Fatalf("the printed entry does not parse: %v", err)
	}
	if p := f.ToolsetPins()[srv.URL]; p.SHA256 != want {
		t.Errorf("the printed entry pins %+v, want %s", p, want)
	}
	// A file holding the same manifest, written another way, has the same digest.
	var v any
	json.Unmarshal(raw, &v)
	pretty, _ := json.MarshalIndent(v, "", "    ")
	code, out, _ = runVerb(t, context.Background(), "validate", writeFile(t, "m.json", string(pretty)))
	if code != 0 || !strings.Contains(out, "sha256: "+want) || !strings.Contains(out, `add "sha256": "`+want+`" to the toolset_server entry`) {
		t.Errorf("file: status %d, output:\n%s", code, out)
	}
}

func TestValidateErrors(t *testing.T) {
	ctx := context.Background()
	code, _, errOut := runVerb(t, ctx, "validate", filepath.Join(t.TempDir(), "missing.json"))
	if code != 1 || !strings.Contains(errOut, "no such file") || !strings.Contains(errOut, "give a file path") {
		t.Errorf("missing file: status %d, stderr %q", code, errOut)
	}
	code, _, errOut = runVerb(t, ctx, "validate")
	if code != 2 || !strings.Contains(errOut, "usage: rap validate") {
		t.Errorf("no argument: status %d, stderr %q", code, errOut)
	}
	srv := httptest.NewServer(nil) // answers 404 everywhere
	defer srv.Close()
	code, _, errOut = runVerb(t, ctx, "validate", srv.URL)
	if code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("404 server: status %d, stderr %q", code, errOut)
	}
	p := writeFile(t, "notjson.json", `{"name": `)
	code, out, _ := runVerb(t, ctx, "validate", p)
	if code != 1 || !strings.Contains(out, "error: ") {
		t.Errorf("truncated JSON: status %d, stdout %q", code, out)
	}
}

// serveToolServer starts s, serves it over loopback and shuts it down when
// the test ends.
func serveToolServer(t testing.TB, s *rap.Server) *httptest.Server {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		hs.Close()
	})
	return hs
}
