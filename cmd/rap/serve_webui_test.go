package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gorap/gorap/webui"
)

// rap serve serves the web UI at "/" without the client token, next to
// the client API that still requires it.
func TestServeWebUI(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir))
	s.Token = "client-secret-token-42"
	info, stdout, _, stop := runningServe(t, s)
	defer stop()

	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(info.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	resp, body := get("/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<script type="module" src="/assets/app.js">`) {
		t.Fatalf("GET /: %d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Content-Security-Policy"); got != webui.ContentSecurityPolicy {
		t.Errorf("GET /: Content-Security-Policy %q", got)
	}
	if resp, _ := get("/assets/app.js"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /assets/app.js: %d", resp.StatusCode)
	}
	if resp, _ := get("/v1/threads"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/threads without the token: %d, want 401", resp.StatusCode)
	}
	if !strings.Contains(stdout.String(), "web UI:       "+info.URL+"/") {
		t.Errorf("rap serve does not print the web UI's address:\n%s", stdout)
	}
}
