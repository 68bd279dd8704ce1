package raptest

// Migrate: /migrate is sent only to toolsets that say needsMigration, with
// the runtime's authentication, and its answer is reported as it is.

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gorap/gorap/rap"
)

// migratingTool serves a rap.Server whose Migrator records its requests
// and returns fail.
func migratingTool(t *testing.T, token string, fail error) (*httptest.Server, func() []rap.MigrateRequest) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen []rap.MigrateRequest
	)
	s := rap.NewServer("moving", &rap.ServerOptions{
		Logger:      slog.New(slog.DiscardHandler),
		BearerToken: token,
		Migrator: func(ctx context.Context, req *rap.MigrateRequest) error {
			mu.Lock()
			seen = append(seen, *req)
			mu.Unlock()
			return fail
		},
	})
	rap.AddTool(s, &rap.Tool{Name: "noop", Description: "does nothing", InputSchema: rap.EmptyObjectSchema},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) { return rap.Text("ok"), nil })
	ctx := testContext(t)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); _ = s.Shutdown(context.Background()) })
	return srv, func() []rap.MigrateRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]rap.MigrateRequest(nil), seen...)
	}
}

// RAP MI-1: Migrate sends {session_id, destination_url}, authenticated as
// invocations are (RAP CA-3), and returns nil on 200.
func TestMigrateSendsTheRequest(t *testing.T) {
	ctx := testContext(t)
	srv, seen := migratingTool(t, "s3cret", nil)
	rt := NewRuntime(WithBearerToken("s3cret"))
	defer rt.Close()
	if err := rt.Migrate(ctx, srv.URL+"/", "root-1", "http://destination.example/tools"); err != nil {
		t.Fatal(err)
	}
	got := seen()
	if len(got) != 1 || got[0] != (rap.MigrateRequest{SessionID: "root-1", DestinationURL: "http://destination.example/tools"}) {
		t.Errorf("the Migrator saw %+v", got)
	}

	plain := NewRuntime()
	defer plain.Close()
	var se *StatusError
	if err := plain.Migrate(ctx, srv.URL, "root-1", "http://destination.example/tools"); !errors.As(err, &se) || se.Status != http.StatusUnauthorized {
		t.Errorf("Migrate without the bearer token: %v, want a 401 StatusError", err)
	}
}

// RAP MI-1: a server that cannot move the state answers an error status
// with a message; Migrate returns both.
func TestMigrateReportsTheServersError(t *testing.T) {
	ctx := testContext(t)
	srv, _ := migratingTool(t, "", errors.New("the destination is full"))
	rt := NewRuntime()
	defer rt.Close()
	err := rt.Migrate(ctx, srv.URL, "root-1", "http://destination.example")
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusInternalServerError || !strings.Contains(se.Body, "the destination is full") {
		t.Fatalf("Migrate = %v, want a 500 StatusError with the Migrator's message", err)
	}
	if !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "the destination is full") {
		t.Errorf("error %q names neither the status nor the message", err)
	}
}

// RAP MI-1: a runtime never calls /migrate on a toolset without
// needsMigration, so Migrate refuses and sends nothing.
func TestMigrateNeedsNeedsMigration(t *testing.T) {
	ctx := testContext(t)
	ft := newFakeTool(t, nil)
	rt := NewRuntime()
	defer rt.Close()
	err := rt.Migrate(ctx, ft.srv.URL, "root-1", "http://destination.example")
	if err == nil || !strings.Contains(err.Error(), "needsMigration") {
		t.Fatalf("Migrate = %v, want a refusal naming needsMigration", err)
	}
	if reqs := ft.requestsTo(rap.MigratePath); len(reqs) != 0 {
		t.Errorf("%d requests reached /migrate, want none", len(reqs))
	}
}
