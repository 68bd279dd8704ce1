package webui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// get serves one GET request with h.
func get(t *testing.T, h http.Handler, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Result()
}

// The page and its assets come from the binary with their security
// headers (CSP without inline script).
func TestServesPageAndAssetsWithCSP(t *testing.T) {
	h := Handler()
	for path, ctype := range map[string]string{
		"/":                  "text/html",
		"/assets/app.js":     "text/javascript",
		"/assets/api.js":     "text/javascript",
		"/assets/thread.js":  "text/javascript",
		"/assets/render.js":  "text/javascript",
		"/assets/compact.js": "text/javascript",
		"/assets/style.css":  "text/css",
	} {
		resp := get(t, h, path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", path, got, ctype)
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != ContentSecurityPolicy {
			t.Errorf("GET %s: Content-Security-Policy %q", path, got)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: headers %v", path, resp.Header)
		}
	}
	for _, path := range []string{"/assets/", "/assets/index.html", "/nope", "/assets/nope.js"} {
		if resp := get(t, h, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	for _, directive := range []string{"script-src 'self'", "default-src 'none'", "frame-ancestors 'none'", "img-src 'self' data: https:"} {
		if !strings.Contains(ContentSecurityPolicy, directive) {
			t.Errorf("the policy lacks %q", directive)
		}
	}
	if strings.Contains(ContentSecurityPolicy, "unsafe-") {
		t.Errorf("the policy allows something unsafe: %s", ContentSecurityPolicy)
	}
}

// The assets keep to the rules that make the policy and the handling of
// untrusted text hold: no inline script or style, no
// eval, no HTML parsing of strings, no network beyond the page's origin.
func TestAssetsAvoidUnsafeConstructs(t *testing.T) {
	bad := map[string]*regexp.Regexp{
		"innerHTML/outerHTML":   regexp.MustCompile(`(inner|outer)HTML|insertAdjacentHTML|document\.write`),
		"eval":                  regexp.MustCompile(`\beval\(|new Function\(|setTimeout\(\s*['"]`),
		"a URL of another site": regexp.MustCompile(`(src|href)=["']?(https?:)?//`),
		"inline handler":        regexp.MustCompile(`<[^>]+\son[a-z]+=`),
		"inline style":          regexp.MustCompile(`<[^>]+\sstyle=|<style`),
	}
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := assets.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		for what, re := range bad {
			if loc := re.FindIndex(b); loc != nil {
				t.Errorf("%s has %s: %q", path, what, b[loc[0]:loc[1]])
			}
		}
		if strings.HasSuffix(path, ".html") && regexp.MustCompile(`<script[^>]*>\s*[^<\s]`).Match(b) {
			t.Errorf("%s has an inline script", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// WithAPI sends /v1/ and /rap/ to the runtime and the rest to the page.
func TestWithAPIRoutes(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	h := WithAPI(api, nil)
	for path, want := range map[string]int{
		"/":                        http.StatusOK,
		"/assets/app.js":           http.StatusOK,
		"/v1/threads":              http.StatusTeapot,
		"/v1":                      http.StatusTeapot,
		"/rap/callback/x":          http.StatusTeapot,
		"/v1x":                     http.StatusNotFound,
		"/.well-known/rap-toolset": http.StatusNotFound,
	} {
		if got := get(t, h, path).StatusCode; got != want {
			t.Errorf("GET %s: %d, want %d", path, got, want)
		}
	}
}
