package rap_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// GreetArgs are the arguments of the greet tool. The input schema is
// inferred from the struct: name is required, excited is optional.
type GreetArgs struct {
	Name    string `json:"name" jsonschema:"who to greet"`
	Excited bool   `json:"excited,omitempty"`
}

// A tool server with one typed tool. The handler runs after the runtime
// has had its 200, with arguments already validated against the schema;
// what it returns is POSTed to the invocation's callback_url.
func ExampleAddTool() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	s := rap.NewServer("greeter", &rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	rap.AddTool(s, &rap.Tool{Name: "greet", Description: "Greets someone by name."},
		func(ctx context.Context, c *rap.Call, in GreetArgs) (*rap.Reply, error) {
			greeting := "Hello, " + in.Name
			if in.Excited {
				greeting += "!"
			}
			return rap.Text(greeting), nil
		})
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	defer s.Shutdown(ctx)
	srv := httptest.NewServer(s) // or http.ListenAndServe(addr, s)
	defer srv.Close()

	// A fake runtime invokes it over HTTP and waits for the callback.
	rt := raptest.NewRuntime()
	defer rt.Close()
	call, err := rt.Invoke(ctx, srv.URL, "greet", GreetArgs{Name: "Ada", Excited: true})
	if err != nil {
		panic(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text)
	// Output: Hello, Ada!
}

// A subscription tool: the server confirms the call with a result marked
// subscription: true, then the handler emits events in the background
// until it is done, cancelled, or the server shuts down. With a
// ServerOptions.Store the subscription survives restarts: Start calls the
// handler again with sub.Resumed() true and the state it saved.
func ExampleAddSubscription() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	s := rap.NewServer("countdown", &rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	rap.AddSubscription(s, &rap.Tool{Name: "countdown", Description: "Counts down, one event per step."},
		func(ctx context.Context, sub *rap.Subscription, in struct {
			From int `json:"from"`
		}) error {
			for i := in.From; i > 0; i-- {
				if err := sub.Emit(ctx, fmt.Sprintf(`{"remaining":%d}`, i)); err != nil {
					return err
				}
			}
			return sub.Final(ctx, `{"remaining":0}`, false)
		})
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	defer s.Shutdown(ctx)
	srv := httptest.NewServer(s)
	defer srv.Close()

	rt := raptest.NewRuntime()
	defer rt.Close()
	call, err := rt.Invoke(ctx, srv.URL, "countdown", map[string]int{"from": 2})
	if err != nil {
		panic(err)
	}
	res, err := call.Result(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Subscription, strings.Contains(res.Text, call.Invocation.ID))
	events, err := call.Events(ctx, 3)
	if err != nil {
		panic(err)
	}
	for _, e := range events {
		fmt.Println(e.Text, e.Final)
	}
	// Output:
	// true true
	// {"remaining":2} false
	// {"remaining":1} false
	// {"remaining":0} true
}

// A subscription that sets up before it is confirmed: with
// ConfirmInHandler the handler opens what it watches first, and a setup
// failure reaches the model as an ordinary "Error: " result instead of a
// subscription that ends at once.
func ExampleConfirmInHandler() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	feeds := map[string][]string{"news": {"headline 1", "headline 2"}}
	s := rap.NewServer("feeds", &rap.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	rap.AddSubscription(s, &rap.Tool{Name: "follow", Description: "Follows a feed."},
		func(ctx context.Context, sub *rap.Subscription, in struct {
			Feed string `json:"feed"`
		}) error {
			items, ok := feeds[in.Feed] // the setup
			if !ok {
				return fmt.Errorf("Error: there is no feed %q; follow one of: news", in.Feed)
			}
			if err := sub.Confirm(ctx); err != nil {
				return err
			}
			for _, it := range items {
				if err := sub.Emit(ctx, fmt.Sprintf("%q", it)); err != nil {
					return err
				}
			}
			return sub.Final(ctx, `"end"`, false)
		}, rap.ConfirmInHandler())
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	defer s.Shutdown(ctx)
	srv := httptest.NewServer(s)
	defer srv.Close()

	rt := raptest.NewRuntime()
	defer rt.Close()
	for _, feed := range []string{"sports", "news"} {
		call, err := rt.Invoke(ctx, srv.URL, "follow", map[string]string{"feed": feed})
		if err != nil {
			panic(err)
		}
		res, err := call.Result(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(feed, res.Subscription, strings.HasPrefix(res.Text, "Error: "))
	}
	// Output:
	// sports false true
	// news true false
}
