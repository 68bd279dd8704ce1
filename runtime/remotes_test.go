package runtime

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gorap/gorap/runtime/api"
)

// getJSON gets url and returns the status and the answer, following no
// redirect.
func getJSON(t *testing.T, url string) (int, []byte) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// GET /v1/remotes lists the configured remotes' names, sorted, and never
// their URLs or tokens; a runtime without remotes answers an empty list.
func TestRemoteNamesNeverShowURLsOrTokens(t *testing.T) {
	e := newEnv(t, envOptions{turns: abortTurns, tweak: func(c *Config) {
		c.Remotes = map[string]Remote{
			"west": {URL: "https://west.example", Token: "west-secret-token"},
			"east": {URL: "https://east.example", Token: "east-secret-token"},
		}
	}})
	if got := strings.Join(e.rt.RemoteNames(), ","); got != "east,west" {
		t.Errorf("RemoteNames() = %s; want east,west", got)
	}
	status, body := getJSON(t, e.srv.URL+"/v1/remotes")
	var resp api.RemotesResponse
	if status != http.StatusOK || json.Unmarshal(body, &resp) != nil || strings.Join(resp.Remotes, ",") != "east,west" {
		t.Fatalf("GET /v1/remotes: %d %s; want east and west", status, body)
	}
	if strings.Contains(string(body), "example") || strings.Contains(string(body), "secret") {
		t.Errorf("GET /v1/remotes shows a URL or a token: %s", body)
	}
	none := newEnv(t, envOptions{turns: abortTurns})
	if status, body := getJSON(t, none.srv.URL+"/v1/remotes"); status != http.StatusOK || strings.TrimSpace(string(body)) != `{"remotes":[]}` {
		t.Errorf("GET /v1/remotes without remotes: %d %s; want an empty list", status, body)
	}
}

// After a session moved away, GET /v1/moved/{id} answers where it went
// (200, no redirect) for its root thread; before the move, and for a
// thread that never existed, it answers 404.
func TestMovedSaysWhereASessionWent(t *testing.T) {
	a := newEnv(t, envOptions{turns: abortTurns})
	b := newEnv(t, envOptions{turns: abortTurns})
	th := a.newThread()
	if status, body := getJSON(t, a.srv.URL+"/v1/moved/"+th); status != http.StatusNotFound {
		t.Errorf("GET /v1/moved of a session still here: %d %s; want 404", status, body)
	}
	status, body, _ := postJSON(t, a.srv.URL+"/v1/threads/"+th+"/migrate", api.MoveRequest{To: b.srv.URL})
	if status != http.StatusOK {
		t.Fatalf("move: %d %s", status, body)
	}
	status, body = getJSON(t, a.srv.URL+"/v1/moved/"+th)
	var resp api.MovedToResponse
	if status != http.StatusOK || json.Unmarshal(body, &resp) != nil || resp.MovedTo != b.srv.URL {
		t.Errorf("GET /v1/moved of the moved session: %d %s; want 200 moved to %s", status, body, b.srv.URL)
	}
	if status, body := getJSON(t, a.srv.URL+"/v1/moved/no-such-thread"); status != http.StatusNotFound {
		t.Errorf("GET /v1/moved of an unknown thread: %d %s; want 404", status, body)
	}
	if status, _ := getJSON(t, b.srv.URL+"/v1/moved/"+th); status != http.StatusNotFound {
		t.Errorf("GET /v1/moved at the destination: %d; want 404 (the session is there)", status)
	}
}
