package toolsjson

import (
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gorap/gorap/rap"
)

// NewServer fills its defaults in a copy: the caller's Options and the
// rap.ServerOptions it points to read the same afterwards, while the
// server itself runs with the defaults.
func TestNewServerLeavesCallersOptionsUnchanged(t *testing.T) {
	b, err := Load(writeValid(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	server := &rap.ServerOptions{BearerToken: "secret"}
	opts := &Options{Logger: slog.New(slog.DiscardHandler), Server: server}
	want, wantServer := *opts, *server
	s, err := NewServer(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*opts, want) || opts.Server != server {
		t.Errorf("NewServer changed the caller's Options:\n got %+v\nwant %+v", *opts, want)
	}
	if !reflect.DeepEqual(*server, wantServer) {
		t.Errorf("NewServer changed the caller's ServerOptions:\n got %+v\nwant %+v", *server, wantServer)
	}
	if s.opts.Name != "demo" || s.opts.Timeout != DefaultTimeout || s.opts.ConfirmTimeout != DefaultConfirmTimeout || s.opts.Now == nil {
		t.Errorf("the server's own options lack the defaults: name %q, timeout %v, confirm timeout %v", s.opts.Name, s.opts.Timeout, s.opts.ConfirmTimeout)
	}
}

// Nil options take every default: the bundle directory's name, the
// default timeouts and slog.Default().
func TestNewServerNilOptions(t *testing.T) {
	b, err := Load(writeValid(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(b, nil)
	if err != nil {
		t.Fatalf("NewServer(b, nil): %v", err)
	}
	if s.opts.Name != "demo" || s.opts.Timeout != DefaultTimeout || s.opts.ConfirmTimeout != DefaultConfirmTimeout || s.log != slog.Default() {
		t.Errorf("nil options did not take the defaults: name %q, timeout %v, confirm timeout %v", s.opts.Name, s.opts.Timeout, s.opts.ConfirmTimeout)
	}
}

// Load and Validate take nil options as the zero LoadOptions (a signed
// bundle required) and leave the caller's LoadOptions unchanged.
func TestLoadOptionsNilAndUnchanged(t *testing.T) {
	dir := writeValid(t)
	mustWrite(t, filepath.Join(dir, ManifestFile), "[artifacts.tools]\npath = \"tools.json\"\nblake3 = \"00\"\nversion = 1\n", 0o644)
	if _, err := Load(dir, nil); err == nil {
		t.Fatal("Load(dir, nil) accepted an unsigned bundle")
	}
	if vs, _, err := Validate(dir, nil); err != nil || len(vs) == 0 {
		t.Fatalf("Validate(dir, nil) = %v, %v; want the digest violation", vs, err)
	}
	opts := &LoadOptions{AllowUnsigned: true}
	b, err := Load(dir, opts)
	if err != nil {
		t.Fatalf("Load with AllowUnsigned: %v", err)
	}
	if len(b.Warnings) != 1 || *opts != (LoadOptions{AllowUnsigned: true}) {
		t.Errorf("warnings %v, options after Load %+v", b.Warnings, *opts)
	}
}
