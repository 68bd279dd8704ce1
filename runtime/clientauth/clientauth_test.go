package clientauth

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime"
)

func writeTokens(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func entry(user, token string) string {
	return "[[tokens]]\nuser = \"" + user + "\"\nsha256 = \"" + Digest(token) + "\"\n"
}

// Each token decides its caller: a user's token acts for that user, an
// admin token (from the file or the admin token) for everyone; anything
// else, prefixes and extensions included, is refused.
func TestAuthenticateDecidesTheCaller(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.toml")
	writeTokens(t, path, entry("alice", "tok-alice")+entry("bob", "tok-bob")+
		"[[tokens]]\nname = \"ops\"\nadmin = true\nsha256 = \""+Digest("tok-ops")+"\"\n")
	a, err := New("tok-root", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for header, want := range map[string]*runtime.Caller{
		"Bearer tok-alice":  {UserID: "alice"},
		"bearer tok-bob":    {UserID: "bob"},
		"Bearer tok-ops":    {Admin: true},
		"Bearer tok-root":   {Admin: true},
		"Bearer tok-alic":   nil,
		"Bearer tok-alicex": nil,
		"Basic tok-alice":   nil,
		"tok-alice":         nil,
		"":                  nil,
		"Bearer ":           nil,
	} {
		c, ok := a.Authenticate(header)
		if ok != (want != nil) || (ok && c != *want) {
			t.Errorf("Authenticate(%q) = %+v, %v; want %+v", header, c, ok, want)
		}
	}
}

// The handler refuses unknown tokens with 401, lets callbacks through,
// and hands the caller to the runtime in the request's context.
func TestHandlerCarriesTheCaller(t *testing.T) {
	a, err := New("root", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got runtime.Caller
	srv := httptest.NewServer(a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/threads" {
			got, _ = runtime.CallerFrom(r.Context())
		}
		w.WriteHeader(http.StatusNoContent)
	})))
	defer srv.Close()
	for _, c := range []struct {
		path, auth string
		want       int
	}{
		{"/v1/threads", "Bearer root", 204},
		{"/v1/threads", "Bearer nope", 401},
		{"/v1/threads", "", 401},
		{runtime.CallbackPath + "abc", "", 204},
	} {
		req, _ := http.NewRequest("GET", srv.URL+c.path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s with %q: %d, want %d", c.path, c.auth, resp.StatusCode, c.want)
		}
		if c.want == 401 && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", c.path)
		}
	}
	if !got.Admin {
		t.Errorf("the admin token's caller reached the runtime as %+v", got)
	}
}

// A file that others may read, or with a bad entry, is refused with an
// error that names the problem and the fix.
func TestBadTokensFilesRefused(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.toml")
	if err := os.WriteFile(open, []byte(entry("a", "t")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New("", open, nil); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a 0644 tokens file: %v, want a refusal saying chmod 600", err)
	}
	for body, want := range map[string]string{
		"[[tokens]]\nuser = \"a\"\nsha256 = \"abc\"\n":                                  "64 lowercase hex",
		"[[tokens]]\nuser = \"a\"\nsha256 = \"" + strings.ToUpper(Digest("t")) + "\"\n": "64 lowercase hex",
		"[[tokens]]\nsha256 = \"" + Digest("t") + "\"\n":                                "admin = true",
		entry("a", "t") + entry("b", "t"):                                               "same sha256",
		"[[tokens]]\nuser = \"a\"\ntoken = \"t\"\nsha256 = \"" + Digest("t") + "\"\n":   "unknown field",
		"[[tokens]\n": "",
	} {
		if _, err := Parse([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error mentioning %q", body, err, want)
		}
	}
	if _, err := New("", "", nil); err == nil {
		t.Error("New without any token should fail")
	}
}

// A changed tokens file is read again without a restart: added tokens
// work, removed ones stop working. A file that breaks, opens to other
// users or disappears revokes its tokens (failing closed) until fixed, is
// logged once per problem, and the admin token keeps working.
func TestTokensFileReloads(t *testing.T) {
	old := recheckEvery
	recheckEvery = 0
	t.Cleanup(func() { recheckEvery = old })
	path := filepath.Join(t.TempDir(), "tokens.toml")
	writeTokens(t, path, entry("alice", "tok-a"))
	var logs syncBuffer
	a, err := New("root", path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, ok := a.Authenticate("Bearer tok-b"); ok {
		t.Fatal("tok-b accepted before it was added")
	}
	writeTokens(t, path, entry("bob", "tok-b"))
	if c, ok := a.Authenticate("Bearer tok-b"); !ok || c.UserID != "bob" {
		t.Fatalf("tok-b after it was added: %+v %v", c, ok)
	}
	if _, ok := a.Authenticate("Bearer tok-a"); ok {
		t.Fatal("tok-a still accepted after it was removed")
	}
	for _, broken := range []func(){
		func() { writeTokens(t, path, "[[tokens]]\nuser = \"x\"\nsha256 = \"bad\"\n") },
		func() { writeTokens(t, path, entry("bob", "tok-b")); os.Chmod(path, 0o644) },
		func() { os.Remove(path) },
	} {
		writeTokens(t, path, entry("bob", "tok-b"))
		if _, ok := a.Authenticate("Bearer tok-b"); !ok {
			t.Fatal("tok-b refused with a good file")
		}
		broken()
		for range 3 {
			if _, ok := a.Authenticate("Bearer tok-b"); ok {
				t.Fatalf("a broken, open or missing file left its tokens working:\n%s", logs.String())
			}
		}
		if c, ok := a.Authenticate("Bearer root"); !ok || !c.Admin {
			t.Fatal("the admin token stopped working with the file")
		}
	}
	if n := strings.Count(logs.String(), "unusable"); n != 3 {
		t.Fatalf("3 problems were logged %d times, want once each:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "tok-b") {
		t.Fatal("a token reached the log")
	}
}

// A request still running when its token is revoked (an event stream)
// is ended; one whose token stays is not.
func TestRevokedTokenEndsRunningRequests(t *testing.T) {
	old := recheckEvery
	recheckEvery = 10 * time.Millisecond
	t.Cleanup(func() { recheckEvery = old })
	path := filepath.Join(t.TempDir(), "tokens.toml")
	writeTokens(t, path, entry("alice", "tok-a")+entry("bob", "tok-b"))
	a, err := New("", path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ended := make(chan string, 2)
	h := a.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := runtime.CallerFrom(r.Context())
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			ended <- c.UserID
		case <-time.After(30 * time.Second):
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tok := range []string{"tok-a", "tok-b"} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/threads/x/events", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
	}
	writeTokens(t, path, entry("bob", "tok-b"))
	select {
	case who := <-ended:
		if who != "alice" {
			t.Fatalf("%s's request ended, want alice's (her token was revoked)", who)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the revoked token's running request was not ended")
	}
	select {
	case who := <-ended:
		t.Fatalf("%s's request ended too, though the token stays", who)
	default:
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
