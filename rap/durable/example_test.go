package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
)

// A tool server that keeps subscriptions in a durable store finds them
// again after a restart (RAP SU-1).
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "gorap-durable-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tool.db")
	ctx := context.Background()

	store, err := durable.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	err = store.SaveSubscription(ctx, rap.SubscriptionRecord{
		Invocation: rap.Invocation{
			Operation:   "watch_inbox",
			ID:          "call-7",
			GroupID:     "thread-1",
			CallbackURL: "https://runtime.example/callback?token=abc",
		},
		State: []byte(`{"cursor":41}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	store.Close()

	// After a restart:
	store, err = durable.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	subs, _ := store.ListSubscriptions(ctx)
	for _, s := range subs {
		fmt.Printf("resume %s in %s from %s\n", s.Invocation.ID, s.Invocation.GroupID, s.State)
	}
	// Output:
	// resume call-7 in thread-1 from {"cursor":41}
}
