package anthropic_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/wiretest"
)

// An error body that echoes the API key never carries it
// out of the provider.
func TestErrorNeverCarriesTheAPIKey(t *testing.T) {
	const key = "sk-ant-test-SECRET-0123456789"
	srv := wiretest.NewAnthropic(func(wiretest.Request) wiretest.Reply {
		return wiretest.Reply{Status: http.StatusBadRequest, Error: "invalid request for key " + key}
	})
	defer srv.Close()
	p, err := anthropic.New(&anthropic.Options{APIKey: key, BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil)
	if err == nil {
		t.Fatal("Complete succeeded; want the 400")
	}
	if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), model.Redacted) {
		t.Fatalf("error = %q; want the key masked as %s", err, model.Redacted)
	}
}
