package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The exit statuses of rap chat are the ones its help states:
// 2 for a usage error, 1 when the runtime refused the chat (here a 401),
// and the help says so.
func TestChatExitStatusMatchesHelp(t *testing.T) {
	clearRAPEnv(t)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"chat", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	help := strings.Join(strings.Fields(out.String()+errOut.String()), " ")
	for _, w := range []string{"Exit status: 0", "1 when the runtime refused", "2 for bad flags"} {
		if !strings.Contains(help, w) {
			t.Errorf("help lacks %q:\n%s", w, help)
		}
	}

	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"chat", "--server", "localhost:8080"}, &out, &errOut); code != 2 {
		t.Errorf("malformed --server: exit %d, want 2; stderr %q", code, errOut.String())
	}

	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":"missing or wrong bearer token"}`))
	}))
	defer refusing.Close()
	out.Reset()
	errOut.Reset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code := run(ctx, []string{"chat", "--server", refusing.URL, "--token", "tok-SECRET-42"}, &out, &errOut); code != 1 {
		t.Errorf("401: exit %d, want 1; stderr %q", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "Unauthorized") || strings.Contains(errOut.String(), "tok-SECRET-42") {
		t.Errorf("stderr should name the refusal and never the token: %q", errOut.String())
	}
}
