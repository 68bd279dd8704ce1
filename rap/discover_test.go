package rap_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// RAP TS-4: the discovery URL is the base URL followed by
// /.well-known/rap-toolset.
func TestDiscoveryURL(t *testing.T) {
	good := []struct{ base, want string }{
		{"https://tools.example.com", "https://tools.example.com/.well-known/rap-toolset"},
		{"https://tools.example.com/", "https://tools.example.com/.well-known/rap-toolset"},
		{"https://tools.example.com//", "https://tools.example.com/.well-known/rap-toolset"},
		{"http://127.0.0.1:3001", "http://127.0.0.1:3001/.well-known/rap-toolset"},
		{"http://127.0.0.1:3001/rap/github/", "http://127.0.0.1:3001/rap/github/.well-known/rap-toolset"},
		{"  https://tools.example.com/api  ", "https://tools.example.com/api/.well-known/rap-toolset"},
		{"http://[::1]:8080", "http://[::1]:8080/.well-known/rap-toolset"},
	}
	for _, tc := range good {
		got, err := rap.DiscoveryURL(tc.base)
		if err != nil || got != tc.want {
			t.Errorf("DiscoveryURL(%q) = %q, %v; want %q", tc.base, got, err, tc.want)
		}
	}
	bad := []struct{ base, want string }{
		{"", "must start with http:// or https://"},
		{"tools.example.com", "must start with http:// or https://"},
		{"ftp://tools.example.com", "must start with http:// or https://"},
		{"file:///srv/toolset.json", "must start with http:// or https://"},
		{"https://", "has no host"},
		{"https://tools.example.com/?v=2", "must not have a query or fragment"},
		{"https://tools.example.com/#x", "must not have a query or fragment"},
		{"http://[::1", "not a valid URL"},
	}
	for _, tc := range bad {
		_, err := rap.DiscoveryURL(tc.base)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DiscoveryURL(%q) error = %v, want one containing %q", tc.base, err, tc.want)
		}
	}
	_, err := rap.DiscoveryURL("ftp://admin:pa55word-x@files.example.com")
	if err == nil || strings.Contains(err.Error(), "pa55word-x") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

// toolServer serves manifest at prefix + /.well-known/rap-toolset and
// records the last discovery request.
type toolServer struct {
	*httptest.Server
	last chan *http.Request
}

func newToolServer(t *testing.T, prefix string, h http.HandlerFunc) *toolServer {
	t.Helper()
	ts := &toolServer{last: make(chan *http.Request, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc(prefix+rap.WellKnownPath, func(w http.ResponseWriter, r *http.Request) {
		ts.last <- r
		h(w, r)
	})
	ts.Server = httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "toolsets", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RAP TS-4: a GET with Accept: application/json returns the whole manifest.
func TestFetchToolset(t *testing.T) {
	body := readTestdata(t, "repo_tools.json")
	srv := newToolServer(t, "/rap", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts, raw, err := rap.FetchToolset(ctx, srv.Client(), srv.URL+"/rap/")
	if err != nil {
		t.Fatalf("FetchToolset: %v", err)
	}
	if ts.Name != "repo-tools" || len(ts.Tools) != 3 {
		t.Fatalf("toolset %+v", ts)
	}
	if !bytes.Equal(raw, body) {
		t.Fatal("raw bytes differ from the body served")
	}
	r := <-srv.last
	if r.Method != http.MethodGet {
		t.Fatalf("method %s, want GET", r.Method)
	}
	if got := r.Header.Get("Accept"); got != "application/json" {
		t.Fatalf("Accept %q, want application/json", got)
	}
	if r.URL.Path != "/rap/.well-known/rap-toolset" {
		t.Fatalf("path %q", r.URL.Path)
	}
	// A nil client means http.DefaultClient.
	if _, _, err := rap.FetchToolset(ctx, nil, srv.URL+"/rap"); err != nil {
		t.Fatalf("nil client: %v", err)
	}
}

func TestFetchToolsetFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("non-200 names the status and quotes the body", func(t *testing.T) {
		srv := newToolServer(t, "", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "toolset disabled\x00 for\tmaintenance", http.StatusServiceUnavailable)
		})
		ts, raw, err := rap.FetchToolset(ctx, srv.Client(), srv.URL)
		if ts != nil || raw != nil {
			t.Fatal("a failed fetch returned a toolset or bytes")
		}
		var de *rap.DiscoveryError
		if !errors.As(err, &de) || de.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("error %v (%T)", err, err)
		}
		for _, s := range []string{"503 Service Unavailable", "toolset disabled\uFFFD for maintenance", srv.URL + rap.WellKnownPath} {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("error %q lacks %q", err, s)
			}
		}
	})
	t.Run("long error body is cut", func(t *testing.T) {
		srv := newToolServer(t, "", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write(bytes.Repeat([]byte("e"), 10000))
		})
		_, _, err := rap.FetchToolset(ctx, srv.Client(), srv.URL)
		var de *rap.DiscoveryError
		if !errors.As(err, &de) || len([]rune(de.Excerpt)) != 201 || !strings.HasSuffix(de.Excerpt, "…") {
			t.Fatalf("excerpt %q (%v)", de.Excerpt, err)
		}
	})
	t.Run("no discovery endpoint", func(t *testing.T) {
		srv := newToolServer(t, "/elsewhere", func(w http.ResponseWriter, r *http.Request) {})
		_, _, err := rap.FetchToolset(ctx, srv.Client(), srv.URL)
		var de *rap.DiscoveryError
		if !errors.As(err, &de) || de.StatusCode != http.StatusNotFound {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("oversized manifest", func(t *testing.T) {
		srv := newToolServer(t, "", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"name":"`))
			w.Write(bytes.Repeat([]byte("x"), rap.MaxManifestBytes))
			w.Write([]byte(`"}`))
		})
		ts, raw, err := rap.FetchToolset(ctx, srv.Client(), srv.URL)
		if err == nil || ts != nil || raw != nil || !strings.Contains(err.Error(), "larger than 4194304 bytes") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("invalid manifest (RAP TS-5)", func(t *testing.T) {
		srv := newToolServer(t, "", func(w http.ResponseWriter, r *http.Request) {
			w.Write(readTestdata(t, "invalid_many.json"))
		})
		ts, raw, err := rap.FetchToolset(ctx, srv.Client(), srv.URL)
		if ts != nil || raw != nil {
			t.Fatal("an invalid manifest was returned")
		}
		if len(violations(t, err)) < 5 || !strings.Contains(err.Error(), srv.URL) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		srv := newToolServer(t, "", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>login</html>"))
		})
		_, _, err := rap.FetchToolset(ctx, srv.Client(), srv.URL)
		wantViolation(t, violations(t, err), "", "must be a JSON object, got invalid JSON")
	})
	t.Run("server down", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		base := srv.URL
		srv.Close()
		_, _, err := rap.FetchToolset(ctx, nil, base)
		if err == nil || !strings.Contains(err.Error(), base+rap.WellKnownPath) || !strings.Contains(err.Error(), "tool server is running") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("bad base URL", func(t *testing.T) {
		_, _, err := rap.FetchToolset(ctx, nil, "tools.example.com")
		if err == nil || !strings.Contains(err.Error(), "http://") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("password never in errors", func(t *testing.T) {
		srv := newToolServer(t, "", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "nope", http.StatusUnauthorized)
		})
		base := strings.Replace(srv.URL, "http://", "http://ops:t0ps3cret-word@", 1)
		_, _, err := rap.FetchToolset(ctx, srv.Client(), base)
		if err == nil || strings.Contains(err.Error(), "t0ps3cret-word") {
			t.Fatalf("error %v", err)
		}
		r := <-srv.last
		if u, p, ok := r.BasicAuth(); !ok || u != "ops" || p != "t0ps3cret-word" {
			t.Fatalf("credentials in the base URL were not sent: %v %q", ok, u)
		}
	})
}

// Cancelling the context ends the fetch.
func TestFetchToolsetContextCancel(t *testing.T) {
	started := make(chan struct{})
	srv := newToolServer(t, "", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := rap.FetchToolset(ctx, srv.Client(), srv.URL)
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("request never arrived")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("FetchToolset did not return after cancel")
	}
}

func ExampleFetchToolset() {
	// A tool server publishes its manifest at /.well-known/rap-toolset.
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+rap.WellKnownPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"name":"clock","endpoint":"https://clock.example.com/invoke","tools":[
			{"name":"now","description":"Current time","inputSchema":{"type":"object","additionalProperties":false}}]}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// A runtime is configured with the base URL only (RAP TS-4).
	ts, raw, err := rap.FetchToolset(context.Background(), srv.Client(), srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ts.Name, ts.Tools[0].Name, len(raw) > 0)
	// Output:
	// clock now true
}
