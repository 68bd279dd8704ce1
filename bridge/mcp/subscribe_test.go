package mcp

import (
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server with resources.subscribe gets a
// {name}_subscribe_resource tool, named after the server whatever the
// prefix; its call is a RAP subscription (RAP SU-1): each
// notifications/resources/updated becomes a subscription_event with the
// re-read contents, and cancelling it unsubscribes at the MCP server.
func TestResourceSubscription(t *testing.T) {
	f := startHTTP(t, func(o *Options) { o.Prefix = "t_" })
	ctx := ctxT(t)
	ts, err := f.rt.Discover(ctx, f.url)
	if err != nil {
		t.Fatal(err)
	}
	if toolByName(ts, "test_subscribe_resource") == nil {
		t.Fatalf("no test_subscribe_resource among %v", names(ts))
	}
	c, err := f.rt.Invoke(ctx, f.url, "test_subscribe_resource", map[string]any{"uri": "mem://counter"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Subscription {
		t.Fatalf("confirming result = %+v, want a subscription", res)
	}
	waitFor(t, "the MCP server to see the subscription", func() bool { return slices.Contains(f.hooks.subEvents(), "+mem://counter") })
	for i := int64(1); i <= 2; i++ {
		f.hooks.counter.Store(i * 10)
		if err := f.server.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: "mem://counter"}); err != nil {
			t.Fatal(err)
		}
		evs, err := c.Events(ctx, 1) // one event per update
		if err != nil {
			t.Fatal(err)
		}
		want := map[int64]string{1: `"text":"10"`, 2: `"text":"20"`}[i]
		if got := evs[0].Text; !strings.Contains(got, want) || !strings.Contains(got, `"uri":"mem://counter"`) {
			t.Errorf("event %d = %s, want contents %s", i, got, want)
		}
	}
	if err := c.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the MCP server to see the unsubscription", func() bool { return slices.Contains(f.hooks.subEvents(), "-mem://counter") })
}

// The subscription tool is not added in proxy mode (exactly the two CF-2
// tools), nor for a server without resources.subscribe.
func TestNoSubscribeToolWithoutSupport(t *testing.T) {
	f := startStdio(t, nil) // the stdio test server has no subscribe handler
	if name := f.bridge.OwnToolName(SubscribeToolName); toolByName(f.bridge.Toolset("http://x/"), name) != nil {
		t.Errorf("%s offered by a server without resources.subscribe", name)
	}
}

// Two bridges of resource-subscribing servers, with no prefix, serve
// their subscription tools under different names, so a runtime that
// uses both keeps both (a collision would drop both, RAP TS-6).
func TestSubscribeToolsOfTwoServersDiffer(t *testing.T) {
	a := startHTTP(t, func(o *Options) { o.Name = "notes" })
	b := startHTTP(t, func(o *Options) { o.Name = "people" })
	for _, c := range []struct {
		f    *fixture
		want string
	}{{a, "notes_subscribe_resource"}, {b, "people_subscribe_resource"}} {
		if toolByName(c.f.bridge.Toolset("http://x/"), c.want) == nil {
			t.Errorf("no %s among %v", c.want, names(c.f.bridge.Toolset("http://x/")))
		}
	}
}
