package client_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// RenameThread and ArchiveThread change a session's title and archived
// flag and return its root thread; ListOptions.Query searches titles and
// first messages; ListOptions.Archived leaves archived sessions out or
// lists them alone, and left empty lists them with the others (as before
// archiving existed). A title over the limit is an *Error with the
// runtime's message.
func TestRenameArchiveAndSearch(t *testing.T) {
	rt := startRuntime(scripted.New([]scripted.Turn{{Text: "ok", Repeat: true}}), "")
	defer rt.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	c, _ := client.New(rt.URL)
	var ids []string
	for _, text := range []string{"Deploy the API", "Write the report"} {
		th, err := c.CreateThread(ctx, api.CreateThreadRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.PostMessage(ctx, th.ID, text); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, th.ID)
	}
	deploy, report := ids[0], ids[1]
	th, err := c.RenameThread(ctx, deploy, "Production rollout")
	if err != nil || th.ID != deploy || th.Title != "Production rollout" {
		t.Fatalf("RenameThread = %+v, %v", th, err)
	}
	if th, err = c.ArchiveThread(ctx, report, true); err != nil || !th.Archived || th.Title != "Write the report" {
		t.Fatalf("ArchiveThread = %+v, %v; want it archived with its derived title", th, err)
	}
	list := func(opts client.ListOptions) []string {
		t.Helper()
		var got []string
		for th, err := range c.Threads(ctx, opts) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, th.ID)
		}
		return got
	}
	for _, x := range []struct {
		opts client.ListOptions
		want []string
	}{
		{client.ListOptions{}, []string{deploy, report}},
		{client.ListOptions{Archived: api.ArchivedExclude}, []string{deploy}},
		{client.ListOptions{Archived: api.ArchivedOnly}, []string{report}},
		{client.ListOptions{Query: "ROLLOUT"}, []string{deploy}},
		{client.ListOptions{Query: "deploy api"}, []string{deploy}},
		{client.ListOptions{Query: "report", Archived: api.ArchivedExclude}, nil},
	} {
		if got := list(x.opts); !slices.Equal(got, x.want) {
			t.Errorf("Threads(%+v) = %v, want %v", x.opts, got, x.want)
		}
	}
	_, err = c.RenameThread(ctx, deploy, strings.Repeat("x", api.MaxTitleChars+1))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 400 || !strings.Contains(ce.Message, "the limit is 200") {
		t.Errorf("a title too long: %v; want a 400 *client.Error naming the limit", err)
	}
	if th, err = c.RenameThread(ctx, deploy, ""); err != nil || th.Title != "Deploy the API" {
		t.Errorf("RenameThread to \"\" = %+v, %v; want the derived title back", th, err)
	}
}
