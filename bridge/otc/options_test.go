package otc

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
)

// New fills its defaults in a copy: the caller's Options and the
// rap.ServerOptions it points to read the same afterwards, while the
// bridge itself runs with the defaults.
func TestNewLeavesCallersOptionsUnchanged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := newArcadeWorker(t, "worker-secret-1")
	server := &rap.ServerOptions{BearerToken: "secret"}
	opts := &Options{Client: &Client{BaseURL: w.srv.URL, Secret: []byte("worker-secret-1")},
		Logger: slog.New(slog.DiscardHandler), Server: server}
	want, wantServer := *opts, *server
	b, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*opts, want) || opts.Server != server {
		t.Errorf("New changed the caller's Options:\n got %+v\nwant %+v", *opts, want)
	}
	if !reflect.DeepEqual(*server, wantServer) {
		t.Errorf("New changed the caller's ServerOptions:\n got %+v\nwant %+v", *server, wantServer)
	}
	if b.opts.Name != "otc" || b.opts.CallTimeout != DefaultCallTimeout || b.opts.Server.Workers != DefaultWorkers || b.opts.Server.BearerToken != "secret" {
		t.Errorf("the bridge's own options lack the defaults: name %q, call timeout %v, workers %d, token %q",
			b.opts.Name, b.opts.CallTimeout, b.opts.Server.Workers, b.opts.Server.BearerToken)
	}
}

// Nil options are an error naming Options.Client, the one required field;
// a nil Server takes the defaults.
func TestNewNilOptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := New(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "Options.Client") {
		t.Fatalf("New(nil) = %v, want an error naming Options.Client", err)
	}
	w := newArcadeWorker(t, "worker-secret-1")
	b, err := New(ctx, &Options{Client: &Client{BaseURL: w.srv.URL, Secret: []byte("worker-secret-1")}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New with a nil Server: %v", err)
	}
	if b.opts.Server == nil || b.opts.Server.Workers != DefaultWorkers {
		t.Errorf("a nil Server did not take the defaults: %+v", b.opts.Server)
	}
}
