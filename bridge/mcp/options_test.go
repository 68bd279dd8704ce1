package mcp

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
)

// New fills its defaults in a copy: the caller's Options and the
// rap.ServerOptions it points to read the same afterwards, while the
// bridge itself runs with the defaults.
func TestNewLeavesCallersOptionsUnchanged(t *testing.T) {
	server := &rap.ServerOptions{BearerToken: "secret"}
	opts := &Options{Name: "files", URL: "http://127.0.0.1:1/mcp", Logger: quietLogger(), Server: server}
	want, wantServer := *opts, *server
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*opts, want) || opts.Server != server {
		t.Errorf("New changed the caller's Options:\n got %+v\nwant %+v", *opts, want)
	}
	if !reflect.DeepEqual(*server, wantServer) {
		t.Errorf("New changed the caller's ServerOptions:\n got %+v\nwant %+v", *server, wantServer)
	}
	if b.opts.Mode != ModeDirect || b.opts.CallTimeout != defaultCallTimeout || b.opts.Server.Workers != DefaultWorkers || b.opts.Server.BearerToken != "secret" {
		t.Errorf("the bridge's own options lack the defaults: mode %q, call timeout %v, workers %d, token %q",
			b.opts.Mode, b.opts.CallTimeout, b.opts.Server.Workers, b.opts.Server.BearerToken)
	}
}

// Nil options (Server included) take every default; nil Options are an
// error naming the fields to set, since a bridge needs a name and a server.
func TestNewNilOptions(t *testing.T) {
	_, err := New(nil)
	if err == nil {
		t.Fatal("New(nil) accepted")
	}
	for _, field := range []string{"Options.Name", "Options.Command", "Options.URL"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("New(nil) error %q does not name %s", err, field)
		}
	}
	b, err := New(&Options{Name: "files", URL: "http://127.0.0.1:1/mcp", Logger: quietLogger()})
	if err != nil {
		t.Fatalf("New with a nil Server: %v", err)
	}
	if b.opts.Server == nil || b.opts.Server.Workers != DefaultWorkers {
		t.Errorf("a nil Server did not take the defaults: %+v", b.opts.Server)
	}
}
