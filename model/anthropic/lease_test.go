package anthropic

import (
	"errors"
	"net/http"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
)

// TestErrorKeepsItsRequestBody: an API error returned by Complete carries
// the request (sdk.Error.Request, DumpRequest), whose body must still be
// the one sent after later completions, which lend body buffers, have run.
// (Shown to fail when the buffer of a failed request is reused.)
func TestErrorKeepsItsRequestBody(t *testing.T) {
	wiretest.CheckErrorKeepsRequestBody(t, wiretest.NewAnthropic, func(srv *wiretest.Server) model.Provider {
		p, err := New(&Options{APIKey: "k", BaseURL: srv.URL})
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
	p, err := New(&Options{APIKey: "k", BaseURL: "http://127.0.0.1:1", HTTPClient: &http.Client{Transport: roundTripFunc(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if p.leaseBodies {
		t.Fatal("a provider on a custom RoundTripper leases its bodies; it cannot know when they are written")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
