package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	sdk "github.com/openai/openai-go/v3"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
)

// TestErrorKeepsItsRequestBody: an API error returned by Complete carries
// the request (sdk.Error.Request, DumpRequest), whose body must still be
// the one sent after later completions, which lend body buffers, have run.
// (Shown to fail when the buffer of a failed request is reused.)
func TestErrorKeepsItsRequestBody(t *testing.T) {
	wiretest.CheckErrorKeepsRequestBody(t, wiretest.NewOpenAI, func(srv *wiretest.Server) model.Provider {
		p, err := New(&Options{APIKey: "k", BaseURL: srv.URL + "/v1"})
		if err != nil {
			t.Fatal(err)
		}
		if !p.leaseBodies {
			t.Fatal("a provider on net/http's transport does not lease its bodies")
		}
		return p
	}, func(err error) ([]byte, bool) {
		var apiErr *sdk.Error
		if !errors.As(err, &apiErr) || apiErr.Request == nil {
			return nil, false
		}
		return apiErr.DumpRequest(true), true
	})
}

func TestCustomTransportDoesNotLease(t *testing.T) {
	p, err := New(&Options{APIKey: "k", BaseURL: "http://127.0.0.1:1/v1", HTTPClient: &http.Client{Transport: roundTripFunc(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if p.leaseBodies {
		t.Fatal("a provider on a custom RoundTripper leases its bodies; it cannot know when they are written")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestLeasedBodiesConcurrently: completions running at once, each on
// buffers other completions used before, each send their own conversation
// and nothing else.
func TestLeasedBodiesConcurrently(t *testing.T) {
	srv := wiretest.NewOpenAI(func(wiretest.Request) wiretest.Reply { return wiretest.Reply{Text: "ok"} })
	defer srv.Close()
	p, err := New(&Options{APIKey: "k", BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				// Lengths vary so that buffers are reused for bodies both
				// shorter and longer than the one they held.
				text := fmt.Sprintf("marker-%d-%d ", g, i) + strings.Repeat("x", (g*131+i*977)%6000)
				if _, err := p.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: text}}}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, r := range srv.Requests() {
		var b struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
			Stream bool `json:"stream"`
		}
		if err := json.Unmarshal(r.Body, &b); err != nil || len(b.Messages) != 1 || !b.Stream {
			t.Fatalf("a request body is not one conversation of one message (%v):\n%.200s", err, r.Body)
		}
		marker, rest, _ := strings.Cut(b.Messages[0].Content, " ")
		var g, i int
		if _, err := fmt.Sscanf(marker, "marker-%d-%d", &g, &i); err != nil || rest != strings.Repeat("x", (g*131+i*977)%6000) || seen[marker] {
			t.Fatalf("request for %q holds another conversation's text, or came twice", marker)
		}
		seen[marker] = true
	}
	if len(seen) != 8*20 {
		t.Errorf("%d distinct conversations arrived; want %d", len(seen), 8*20)
	}
}

// A client without a Transport uses http.DefaultTransport, which a program
// or an HTTP mock may have replaced: then bodies are not leased (found by
// review: the mock's saved request showed the next completion's body).
func TestReplacedDefaultTransportDoesNotLease(t *testing.T) {
	saved := http.DefaultTransport
	t.Cleanup(func() { http.DefaultTransport = saved })
	http.DefaultTransport = roundTripFunc(nil)
	p, err := New(&Options{APIKey: "k", BaseURL: "http://127.0.0.1:1/v1", HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	if p.leaseBodies {
		t.Fatal("a provider over a replaced http.DefaultTransport leases its bodies")
	}
}

// TestAuthorizationHeader: the API key goes out as a bearer token, and
// nothing else does: not OPENAI_ADMIN_KEY, which the SDK reads from the
// environment and its generic Post would send when no API key is set
// (found by review).
func TestAuthorizationHeader(t *testing.T) {
	srv := wiretest.NewOpenAI(func(wiretest.Request) wiretest.Reply { return wiretest.Reply{Text: "ok"} })
	defer srv.Close()
	t.Setenv(EnvAPIKey, "")
	t.Setenv("OPENAI_ADMIN_KEY", "ADMIN-SECRET")
	for _, c := range []struct{ key, want string }{{"k1", "Bearer k1"}, {"", ""}} {
		p, err := New(&Options{APIKey: c.key, BaseURL: srv.URL + "/v1"})
		if err != nil {
			t.Fatal(err)
		}
		before := len(srv.Requests())
		if _, err := p.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil); err != nil && c.key != "" {
			t.Fatal(err)
		}
		reqs := srv.Requests()
		if len(reqs) != before+1 {
			t.Fatalf("key %q: %d requests sent; want 1", c.key, len(reqs)-before)
		}
		if got := reqs[before].Header.Get("Authorization"); got != c.want {
			t.Errorf("key %q: Authorization %q; want %q", c.key, got, c.want)
		}
	}
}
