package wiretest

import (
	"context"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
)

// CheckErrorKeepsRequestBody fails t unless an API error that a provider's
// Complete returns still shows the request body it was sent with after 20
// later completions, which lend request body buffers (model.BodyLease),
// have run: the SDKs' errors keep the request, whose body DumpRequest
// reads. start starts a server of the provider's wire format (every reply
// is an HTTP 400), newProvider makes the provider for it, and dump returns
// the request kept in Complete's error, false if the error has none.
func CheckErrorKeepsRequestBody(t *testing.T, start func(Script) *Server, newProvider func(*Server) model.Provider, dump func(error) ([]byte, bool)) {
	t.Helper()
	srv := start(func(Request) Reply { return Reply{Status: 400, Error: "refused by the test"} })
	defer srv.Close()
	p := newProvider(srv)
	ask := func(text string) error {
		_, err := p.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: text}}}, nil)
		return err
	}
	errA := ask("SECRET-OF-THREAD-A " + strings.Repeat("a", 2000))
	first, ok := dump(errA)
	if !ok {
		t.Fatalf("Complete's error %v does not carry the SDK's error with its request", errA)
	}
	if !strings.Contains(string(first), "SECRET-OF-THREAD-A") {
		t.Fatalf("the error's request does not show the body sent:\n%.300s", first)
	}
	for range 20 {
		_ = ask("thread B " + strings.Repeat("b", 2000))
	}
	if later, _ := dump(errA); !strings.Contains(string(later), "SECRET-OF-THREAD-A") || strings.Contains(string(later), "thread B") {
		t.Fatalf("the first error's request body changed after later completions:\n%.300s", later)
	}
}
