package main

import (
	"net/http"
	"testing"
)

// TestServeHealthEndpoints: rap serve answers the
// liveness and readiness probes without the client token, while the API
// still requires it.
func TestServeHealthEndpoints(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir, startGettime(t, nil)))
	s.Token = "health-test-token-0123456789"
	info, _, _, stop := runningServe(t, s)
	defer stop()
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusOK, "/v1/threads": http.StatusUnauthorized} {
		resp, err := http.Get(info.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s without a token = %d, want %d", path, resp.StatusCode, want)
		}
	}
}
