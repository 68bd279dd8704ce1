package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorap/gorap/runtime/config"
)

// "rap serve" refuses a non-loopback listen address
// without a client token, and its error says how to set one.
func TestServeRefusesPublicListenWithoutToken(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir))
	s.Listen = "0.0.0.0:0" // closed again before serving anything
	err := serve(context.Background(), s, &syncBuffer{}, &syncBuffer{}, func(*server) {
		t.Error("serve started on 0.0.0.0 without a token")
	})
	if err == nil {
		t.Fatal("serve on 0.0.0.0 without a token: no error")
	}
	for _, want := range []string{config.EnvToken, "--insecure", "127.0.0.1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// Which listen addresses need a token.
func TestCheckListenAuth(t *testing.T) {
	for _, tc := range []struct {
		ip       string
		token    string
		insecure bool
		ok       bool
	}{
		{"127.0.0.1", "", false, true},
		{"::1", "", false, true},
		{"127.0.0.2", "", false, true},
		{"0.0.0.0", "", false, false},
		{"::", "", false, false},
		{"192.0.2.7", "", false, false},
		{"0.0.0.0", "a-token", false, true},
		{"0.0.0.0", "", true, true},
	} {
		addr := &net.TCPAddr{IP: net.ParseIP(tc.ip), Port: 8080}
		err := checkListenAuth(addr, config.Settings{Token: tc.token, Insecure: tc.insecure})
		if (err == nil) != tc.ok {
			t.Errorf("%s token=%q insecure=%v: err = %v, want ok=%v", tc.ip, tc.token, tc.insecure, err, tc.ok)
		}
	}
}

// The client token is checked exactly (any other value,
// a prefix, a longer value, another scheme are refused), the scheme
// name case-insensitively; callbacks are not behind it.
func TestRequireToken(t *testing.T) {
	const token = "s3cret-token-value"
	h := requireToken(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }), token)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/v1/threads", "Bearer " + token, http.StatusNoContent},
		{"/v1/threads", "bearer " + token, http.StatusNoContent},
		{"/v1/threads", "", http.StatusUnauthorized},
		{"/v1/threads", "Bearer ", http.StatusUnauthorized},
		{"/v1/threads", "Bearer " + token[:len(token)-1], http.StatusUnauthorized},
		{"/v1/threads", "Bearer " + token + "x", http.StatusUnauthorized},
		{"/v1/threads", "Bearer " + strings.Repeat("x", len(token)), http.StatusUnauthorized},
		{"/v1/threads", "Basic " + token, http.StatusUnauthorized},
		{"/v1/threads", token, http.StatusUnauthorized},
		{"/rap/callback/abc", "", http.StatusNoContent},
	} {
		req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s with %q: %d, want %d", tc.path, tc.auth, resp.StatusCode, tc.want)
		}
	}
}

// The runtime's HTTP server has header, write and idle timeouts, a header
// limit, and the rap package's connection tracking, which the connection
// cap and the minimum body rate need.
func TestServeHTTPTimeouts(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	info, _, _, _ := runningServe(t, baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir)))
	srv := info.HTTP
	if srv.ReadHeaderTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 || srv.ConnState == nil || srv.ConnContext == nil {
		t.Fatalf("server limits: header %v, write %v, idle %v, max header bytes %d, connection tracking %t; want all set",
			srv.ReadHeaderTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes, srv.ConnState != nil && srv.ConnContext != nil)
	}
}
