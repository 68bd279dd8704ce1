//go:build unix

package runtime

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The callback key and the data directory it creates are
// private whatever the umask (0600 and 0700), and a key an older gorap
// left readable by all is made private when it is loaded.
func TestSecretFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := LoadOrCreateSecret(dir); err != nil {
		t.Fatal(err)
	}
	if m, err := statMode(dir); err != nil || m != 0o700 {
		t.Fatalf("data dir mode %#o, %v; want 0700", m, err)
	}
	key := filepath.Join(dir, "callback.key")
	if m, err := statMode(key); err != nil || m != 0o600 {
		t.Fatalf("callback.key mode %#o, %v; want 0600", m, err)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateSecret(dir); err != nil {
		t.Fatal(err)
	}
	if m, err := statMode(key); err != nil || m != 0o600 {
		t.Fatalf("callback.key mode %#o after loading a 0644 key, %v; want 0600", m, err)
	}
}

// A client API body that names a member twice is refused
// with 400 naming the member, over real HTTP, and nothing is posted.
func TestAPIDuplicateMembers(t *testing.T) {
	e := newEnv(t, envOptions{})
	th := e.newThread()
	for _, c := range []struct{ path, body, want string }{
		{"/v1/threads/" + th + "/messages", `{"text":"hello","text":"goodbye"}`, `"text"`},
		{"/v1/threads/" + th + "/messages", `{"text":"hello","Text":"x","text":"goodbye"}`, `"text"`},
	} {
		resp, err := http.Post(e.srv.URL+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error string }
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.Error, c.want) {
			t.Errorf("POST %s %s: %d %q; want 400 naming %s", c.path, c.body, resp.StatusCode, body.Error, c.want)
		}
	}
	if h := e.history(th); len(h) != 0 {
		t.Errorf("history has %d messages after refused posts", len(h))
	}
	// Equal names in different objects are fine.
	resp, err := http.Post(e.srv.URL+"/v1/threads/"+th+"/messages", "application/json", strings.NewReader(`{"text":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Errorf("a valid post answered %d", resp.StatusCode)
	}
}
