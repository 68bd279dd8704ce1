package toolsjson

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorap/gorap/raptest"
)

func execTool(id, command string, extra string) string {
	return `{"id":"` + id + `","description":"An exec tool.","transport":{"kind":"exec","command":"` + command + `"` + extra + `},` +
		`"input_schema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},` +
		`"result_schema":{"type":"object","properties":{"echo":{"type":"string"}},"required":["echo"]}}`
}

func bundleOf(entries ...string) string {
	return `{"version":1,"tools":[` + strings.Join(entries, ",") + `]}`
}

// The input reaches an exec tool as a private file (first argument), args
// follow, the result reaches the caller; failures are Error results.
func TestExecTransport(t *testing.T) {
	ok := writeScript(t, `test "$2" = "--flag" || { echo "bad args: $*" >&2; exit 3; }
mode=$(stat -c %a "$1")
test "$mode" = 600 || { echo "input file mode $mode" >&2; exit 4; }
text=$(sed -e 's/.*"text":"\([^"]*\)".*/\1/' "$1")
printf '{"echo":"%s"}' "$text"`)
	fail := writeScript(t, `echo "first line" >&2; echo "the disk is full" >&2; exit 7`)
	notJSON := writeScript(t, `echo "hello there"`)
	wrongShape := writeScript(t, `echo '{"other":1}'`)
	dir := writeBundle(t, bundleOf(
		execTool("t.ok", ok, `,"args":["--flag"]`),
		execTool("t.fail", fail, ""),
		execTool("t.notjson", notJSON, ""),
		execTool("t.shape", wrongShape, ""),
		execTool("t.missing", "/nonexistent/tool", ""),
	), "")
	s := serveBundle(t, dir, Options{})

	if got := s.invoke(t, "t_ok", map[string]any{"text": "hi"}); got != `{"echo":"hi"}` {
		t.Fatalf("result %q", got)
	}
	got := s.invoke(t, "t_fail", map[string]any{"text": "x"})
	mustContain(t, got, "Error: ", `"t.fail"`, "exited with status 7", "the disk is full")
	mustContain(t, s.invoke(t, "t_notjson", map[string]any{"text": "x"}), "Error: ", "not JSON", "hello there")
	mustContain(t, s.invoke(t, "t_shape", map[string]any{"text": "x"}), "Error: ", "does not match result_schema", "echo")
	mustContain(t, s.invoke(t, "t_missing", map[string]any{"text": "x"}), "Error: ", "could not run /nonexistent/tool")
}

// Inputs are validated against input_schema before anything runs.
func TestInputValidatedBeforeRun(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	tool := writeScript(t, `touch `+marker+`; echo '{"echo":"x"}'`)
	s := serveBundle(t, writeBundle(t, bundleOf(execTool("t.v", tool, "")), ""), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call, err := s.rt.Invoke(ctx, s.url, "t_v", map[string]any{"text": 5}, raptestUnchecked())
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, res.ModelText(), "Error: ")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tool ran with invalid input")
	}
}

// Cancelling a call and a timeout both kill the tool's whole process
// group.
func TestExecCancelAndTimeoutKillProcessGroup(t *testing.T) {
	pidDir := t.TempDir()
	// The tool starts a grandchild that would outlive a plain kill.
	tool := writeScript(t, `sleep 300 &
echo $! > "`+pidDir+`/$(basename $(mktemp -u))"
wait`)
	dir := writeBundle(t, bundleOf(execTool("t.slow", tool, ""), execTool("t.timeout", tool, `,"timeout_ms":300`)), "")
	s := serveBundle(t, dir, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	pids := func() []int {
		ents, _ := os.ReadDir(pidDir)
		var out []int
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(pidDir, e.Name()))
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				out = append(out, n)
			}
		}
		return out
	}
	alive := func(pid int) bool {
		// A zombie is dead for our purpose: check /proc state.
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return syscall.Kill(pid, 0) == nil
		}
		f := strings.Fields(string(st))
		return len(f) > 2 && f[2] != "Z"
	}

	call, err := s.rt.Invoke(ctx, s.url, "t_slow", map[string]any{"text": "x"})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the tool's child to start", func() bool { return len(pids()) == 1 })
	child := pids()[0]
	if err := call.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the cancelled tool's child to die", func() bool { return !alive(child) })

	got := s.invoke(t, "t_timeout", map[string]any{"text": "x"})
	mustContain(t, got, "Error: ", "timed out after 300ms")
	var second int
	for _, p := range pids() {
		if p != child {
			second = p
		}
	}
	if second == 0 {
		t.Fatal("the timeout tool's child never started")
	}
	waitUntil(t, "the timed-out tool's child to die", func() bool { return !alive(second) })
}

func httpTool(id, method, u, extra string) string {
	return `{"id":"` + id + `","description":"An http tool.","transport":{"kind":"http","method":"` + method + `","url":"` + u + `"` + extra + `},` +
		`"input_schema":{"type":"object","properties":{"to":{"type":"string"},"n":{"type":"integer"}},"required":["to"]},` +
		`"result_schema":{"type":"object","properties":{"sent":{"type":"boolean"}},"required":["sent"]}}`
}

// Templated URL (escaped), static headers, JSON body; non-2xx and bad
// bodies are Error results.
func TestHTTPTransport(t *testing.T) {
	type seen struct {
		method, path, rawPath, query, ctype, static, body string
	}
	got := make(chan seen, 10)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("X-Static"), string(b)}
		switch r.URL.Query().Get("mode") {
		case "500":
			http.Error(w, "relay down", http.StatusBadGateway)
		case "bad":
			fmt.Fprint(w, `{"sent":"maybe"}`)
		default:
			fmt.Fprint(w, `{"sent": true}`)
		}
	}))
	defer api.Close()
	host := strings.TrimPrefix(api.URL, "http://")
	dir := writeBundle(t, bundleOf(
		httpTool("mail.send", "POST", api.URL+"/send/{to}?n={n}&mode={mode}", `,"headers":{"X-Static":"yes"}`),
		strings.Replace(httpTool("mail.get", "GET", api.URL+"/get/{to}", ""), `"required":["to"]`, `"required":["to"]`, 1),
	), "net:"+host+"\n")
	// mode is not in the input schema: widen it for this test.
	s := serveBundle(t, dir, Options{})
	_ = s

	// The schema forbids nothing extra (no additionalProperties), so mode passes.
	res := s.invoke(t, "mail_send", map[string]any{"to": "a b/c?d", "n": 3, "mode": "ok&x=1"})
	if res != `{"sent":true}` {
		t.Fatalf("result %q", res)
	}
	r := <-got
	if r.method != "POST" || r.path != "/send/a b/c?d" || r.rawPath != "/send/a%20b%2Fc%3Fd" || r.query != "n=3&mode=ok%26x%3D1" ||
		r.ctype != "application/json" || r.static != "yes" {
		t.Fatalf("request %+v", r)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || body["to"] != "a b/c?d" {
		t.Fatalf("body %q", r.body)
	}
	mustContain(t, s.invoke(t, "mail_send", map[string]any{"to": "x", "n": 1, "mode": "500"}), "Error: ", "502", "relay down")
	<-got
	mustContain(t, s.invoke(t, "mail_send", map[string]any{"to": "x", "n": 1, "mode": "bad"}), "Error: ", "does not match result_schema")
	<-got
	mustContain(t, s.invoke(t, "mail_send", map[string]any{"to": "x", "n": 1}), "Error: ", `needs the input member "mode"`)
	if res := s.invoke(t, "mail_get", map[string]any{"to": "x"}); res != `{"sent":true}` {
		t.Fatalf("GET result %q", res)
	}
	if r := <-got; r.method != "GET" || r.body != "" {
		t.Fatalf("GET request %+v", r)
	}
	// A connection error is an Error result too.
	api.Close()
	mustContain(t, s.invoke(t, "mail_get", map[string]any{"to": "x"}), "Error: ", "GET", "failed")
}

// A value that would make a path segment "." or ".." (alone, next to
// another value or to a literal ".", or after a literal "%2E") is refused
// with an error naming the template; dots that cannot form such a segment,
// and any value in the query, pass.
func TestURLTemplateRefusesDotSegments(t *testing.T) {
	refused := []struct{ tmpl, a, b, names string }{
		{"https://h.example/items/{a}", "..", "", "{a}"},
		{"https://h.example/items/{a}/x", ".", "", "{a}"},
		{"https://h.example/items/{a}", ".", "", "{a}"},
		{"https://h.example/{a}{b}/x", ".", ".", "{a} = \".\" and {b}"},
		{"https://h.example/items/.{a}", ".", "", "{a}"},
		{"https://h.example/items/%2E{a}", ".", "", "{a}"},
		{"https://h.example/items/{a}?q=1", "..", "", "{a}"},
	}
	for _, c := range refused {
		ut, err := ParseURLTemplate(c.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", c.tmpl, err)
		}
		in, _ := json.Marshal(map[string]string{"a": c.a, "b": c.b})
		out, err := ut.Expand(in)
		if !errors.Is(err, ErrDotSegment) {
			t.Errorf("%s with %q/%q expanded to %q (%v); want ErrDotSegment", c.tmpl, c.a, c.b, out, err)
			continue
		}
		mustContain(t, err.Error(), c.names, "Send a value that is not")
	}
	allowed := []struct{ tmpl, a, want string }{
		{"https://h.example/items/{a}", "...", "https://h.example/items/..."},
		{"https://h.example/items/{a}", ".a", "https://h.example/items/.a"},
		{"https://h.example/items/{a}", "a/..", "https://h.example/items/a%2F.."},
		{"https://h.example/items/{a}", "%2e%2E", "https://h.example/items/%252e%252E"},
		{"https://h.example/items/x{a}", "..", "https://h.example/items/x.."},
		{"https://h.example/items?q={a}", "..", "https://h.example/items?q=.."},
		{"https://h.example/./{a}", "x", "https://h.example/./x"},
	}
	for _, c := range allowed {
		ut, err := ParseURLTemplate(c.tmpl)
		if err != nil {
			t.Fatalf("%s: %v", c.tmpl, err)
		}
		in, _ := json.Marshal(map[string]string{"a": c.a})
		if out, err := ut.Expand(in); err != nil || out != c.want {
			t.Errorf("%s with %q: %q, %v; want %q", c.tmpl, c.a, out, err, c.want)
		}
	}
}

// A tool call whose value is a dot segment ends at once in an Error result
// naming the template, and no request is sent.
func TestHTTPDotSegmentValueRefused(t *testing.T) {
	var hits atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, `{"sent":true}`)
	}))
	defer api.Close()
	dir := writeBundle(t, bundleOf(httpTool("items.get", "GET", api.URL+"/api/items/{to}", "")), "net:"+strings.TrimPrefix(api.URL, "http://")+"\n")
	s := serveBundle(t, dir, Options{})
	for _, v := range []string{"..", "."} {
		mustContain(t, s.invoke(t, "items_get", map[string]any{"to": v}), "Error: ", `{to} = "`+v+`"`, `"." or ".."`)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests reached the server", n)
	}
	if got := s.invoke(t, "items_get", map[string]any{"to": "..."}); got != `{"sent":true}` {
		t.Fatalf("an ordinary dotted value: %q", got)
	}
}

// A redirect to a host without a net: grant is refused.
func TestHTTPRedirectNeedsGrant(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"sent":true}`) }))
	defer other.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := url.Parse(other.URL)
		u.Host = "localhost:" + u.Port()
		http.Redirect(w, r, u.String(), http.StatusFound)
	}))
	defer api.Close()
	dir := writeBundle(t, bundleOf(httpTool("r", "GET", api.URL+"/x/{to}", "")), "net:"+strings.TrimPrefix(api.URL, "http://")+"\n")
	s := serveBundle(t, dir, Options{})
	mustContain(t, s.invoke(t, "r", map[string]any{"to": "x"}), "Error: ", "no net: grant covers")
}

func raptestUnchecked() raptest.InvokeOption { return raptest.Unchecked() }

// Results reach the model as the tool wrote them, compacted: member order
// and large numbers are kept exactly.
func TestResultKeptExactly(t *testing.T) {
	tool := writeScript(t, `printf '{ "z": 1,\n "echo": "x", "n": 12345678901234567890 }'`)
	s := serveBundle(t, writeBundle(t, bundleOf(execTool("t.n", tool, "")), ""), Options{})
	if got := s.invoke(t, "t_n", map[string]any{"text": "x"}); got != `{"z":1,"echo":"x","n":12345678901234567890}` {
		t.Fatalf("result %q", got)
	}
}
