package anthropic

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/gorap/gorap/model"
)

// TestErrorKeepsItsRequestBody: an API error returned by Complete carries
// the request (sdk.Error.Request, DumpRequest), whose body must still be
// the one sent after later completions, which lend body buffers, have run.
// (Shown to fail when the buffer of a failed request is reused: the dump
// then shows the next thread's conversation.)
func TestErrorKeepsItsRequestBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"no"}}`))
	}))
	defer srv.Close()
	p, err := New(Options{APIKey: "k", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if !p.leaseBodies {
		t.Fatal("a provider on net/http's transport does not lease its bodies")
	}
	ask := func(text string) error {
		_, err := p.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: text}}}, nil)
		return err
	}
	errA := ask("SECRET-OF-THREAD-A " + strings.Repeat("a", 2000))
	var apiErr *sdk.Error
	if !errors.As(errA, &apiErr) || apiErr.Request == nil {
		t.Fatalf("Complete's error %v does not carry the SDK's error with its request", errA)
	}
	for range 20 {
		_ = ask("thread B " + strings.Repeat("b", 2000))
	}
	dump := string(apiErr.DumpRequest(true))
	if !strings.Contains(dump, "SECRET-OF-THREAD-A") || strings.Contains(dump, "thread B") {
		t.Fatalf("the first error's request body changed after later completions:\n%.300s", dump)
	}
}

func TestCustomTransportDoesNotLease(t *testing.T) {
	p, err := New(Options{APIKey: "k", BaseURL: "http://127.0.0.1:1", HTTPClient: &http.Client{Transport: roundTripFunc(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if p.leaseBodies {
		t.Fatal("a provider on a custom RoundTripper leases its bodies; it cannot know when they are written")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
