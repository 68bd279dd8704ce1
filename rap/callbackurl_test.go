package rap_test

import (
	"net/url"
	"testing"

	"github.com/gorap/gorap/rap"
)

// An auth_url is shown to people, so only absolute http(s) URLs with a
// host pass (RAP OA-1).
func TestCheckAuthURLAcceptsOnlyAbsoluteHTTPURLs(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want string
	}{
		{"https://auth.example/login?x=1", ""},
		{"HTTP://auth.example:8080/", ""},
		{"javascript:alert(1)", "must be an http:// or https:// URL"},
		{"ftp://auth.example/", "must be an http:// or https:// URL"},
		{"/relative/path", "must be an http:// or https:// URL"},
		{"https:///nohost", "has no host"},
		{"https://bad host/%zz", "is not a valid URL"},
	} {
		if got := rap.CheckAuthURL(c.raw); got != c.want {
			t.Errorf("CheckAuthURL(%q) = %q, want %q", c.raw, got, c.want)
		}
	}
}

func TestSameHostPortComparesHostAndEffectivePort(t *testing.T) {
	for _, c := range []struct {
		raw, endpoint string
		want          bool
	}{
		{"http://Tools.Example/choice?key=1", "http://tools.example:80/invoke", true},
		{"https://tools.example/c", "https://tools.example:443/i", true},
		{"http://tools.example:8081/c", "http://tools.example:8080/i", false},
		{"http://other.example/c", "http://tools.example/i", false},
		{"http://[::1]:9000/c", "http://[::1]:9000/i", true},
		{"http://tools.example/c", "", false},
		{"http://tools.example/%zz", "http://tools.example/i", false},
	} {
		if got := rap.SameHostPort(c.raw, c.endpoint); got != c.want {
			t.Errorf("SameHostPort(%q, %q) = %v, want %v", c.raw, c.endpoint, got, c.want)
		}
	}
}

func TestHostPortFillsTheSchemeDefault(t *testing.T) {
	for raw, want := range map[string][2]string{
		"http://A.example":      {"a.example", "80"},
		"https://a.example":     {"a.example", "443"},
		"https://a.example:444": {"a.example", "444"},
		"http://[::1]:1":        {"::1", "1"},
		"ws://a.example":        {"a.example", ""},
	} {
		u, _ := url.Parse(raw)
		h, p := rap.HostPort(u)
		if h != want[0] || p != want[1] {
			t.Errorf("HostPort(%q) = %q, %q, want %q, %q", raw, h, p, want[0], want[1])
		}
	}
}
