package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// DeleteSession removes a session and reports its thread count; the
// session is then unknown (ErrNotFound), a second delete is ErrNotFound,
// and ListThreads with UserID lists only that user's threads.
func TestDeleteSessionAndListByUser(t *testing.T) {
	rt := startRuntime(scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}}), "")
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, _ := client.New(rt.URL)
	ada, err := c.CreateThread(ctx, api.CreateThreadRequest{UserID: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := c.CreateThread(ctx, api.CreateThreadRequest{UserID: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	page, err := c.ListThreads(ctx, client.ListOptions{UserID: "ada"})
	if err != nil || len(page.Threads) != 1 || page.Threads[0].ID != ada.ID {
		t.Fatalf("ada's threads: %+v, %v; want only %s", page, err, ada.ID)
	}
	n, err := c.DeleteSession(ctx, ada.ID)
	if err != nil || n != 1 {
		t.Fatalf("DeleteSession: %d, %v; want 1, nil", n, err)
	}
	if _, err := c.Thread(ctx, ada.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("the deleted session answers %v, want ErrNotFound", err)
	}
	if _, err := c.DeleteSession(ctx, ada.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
	if _, err := c.Thread(ctx, bob.ID); err != nil {
		t.Errorf("bob's session after deleting ada's: %v", err)
	}
}
