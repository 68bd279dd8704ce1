package sqlite

import (
	"errors"
	"testing"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// TakeChoice's error when no choice waits reads like every other
// not-found error of the store and is store.ErrNotFound.
func TestNoChoiceErrorIsNotFoundWithTheUsualText(t *testing.T) {
	var err error = &noChoice{"t1", "c1"}
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%v is not store.ErrNotFound", err)
	}
	if want := backend.NotFound("user choice", "t1", "c1").Error(); err.Error() != want {
		t.Fatalf("error text %q, want %q", err.Error(), want)
	}
}
