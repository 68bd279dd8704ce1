package openai_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/gorap/gorap/model/openai"
)

// New reads the caller's Options without changing them, the fields it
// pointed to included, and still takes the defaults for the fields left
// empty.
func TestNewLeavesCallersOptionsUnchanged(t *testing.T) {
	images := false
	hc := &http.Client{}
	opts := &openai.Options{APIKey: "k", BaseURL: "http://127.0.0.1:1/v1", HTTPClient: hc, SupportsImages: &images}
	want := *opts
	p, err := openai.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*opts, want) || opts.HTTPClient != hc || opts.SupportsImages != &images || images {
		t.Errorf("New changed the caller's Options:\n got %+v\nwant %+v", *opts, want)
	}
	if p.Name() != "openai:"+openai.DefaultModel || p.SupportsImages() {
		t.Errorf("Name %q, SupportsImages %v; want the default model and the caller's SupportsImages", p.Name(), p.SupportsImages())
	}
}
