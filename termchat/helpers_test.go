package termchat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/display"
	"github.com/gorap/gorap/rap"
)

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

// testLines is a LineReader for tests: it prints the prompt on out, as a
// terminal shows it, and reads the next line from r; the line typed ends
// with the newline the terminal echoes.
type testLines struct {
	r   *bufio.Reader
	out *syncBuffer
	// prompts counts the prompts shown.
	mu      sync.Mutex
	prompts int
}

func (l *testLines) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.prompts
}

func (l *testLines) Prompt(p string) (string, error) {
	l.mu.Lock()
	l.prompts++
	l.mu.Unlock()
	l.out.Write([]byte(p))
	line, err := l.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	l.out.Write([]byte("\n")) // the terminal's echo of the newline
	return strings.TrimSuffix(line, "\n"), nil
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

// requireToken answers 401 to a request of the client API without the
// bearer token, as "rap serve" does.
func requireToken(next http.Handler, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"error": "missing or wrong bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// displayText renders a call with its tool's display script, as rap
// serve does (RAP DS-1).
func displayText(toolName, script string, args json.RawMessage) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return display.Render(ctx, toolName, script, args)
}
