// Package rap implements RAP, the Reactive Agent Protocol, for Go: its
// message types and decoders, toolset manifests with their validation, and
// an SDK for writing tool servers.
//
// In RAP an agent runtime calls tools over HTTP. A tool server publishes a
// manifest at GET /.well-known/rap-toolset naming its tools and their JSON
// Schemas. The runtime POSTs an Invocation to the manifest's endpoint; the
// server answers 200 at once and works afterwards, then POSTs exactly one
// ToolResult to the invocation's callback_url. While the call is pending
// the server may also send an OAuth link, a UserChoice for the user to
// answer, or a ViewUpdate; a subscription tool confirms its call with a
// result marked subscription: true and then sends SubscriptionEvents.
// The runtime may in turn POST /cancel_tool_call, /close_thread, /migrate
// and /tool_call_status to the server.
//
// A tool server is a Server. Create one with NewServer, add tools with
// AddTool (typed arguments: the input schema is inferred from the struct
// and the arguments are validated before the handler runs), AddRawTool or
// AddSubscription, then call Serve or ListenAndServe, or Start and mount
// the Server, an http.Handler, yourself:
//
//	s := rap.NewServer("greeter", nil)
//	rap.AddTool(s, &rap.Tool{Name: "greet", Description: "Greets someone."},
//		func(ctx context.Context, c *rap.Call, in GreetArgs) (*rap.Reply, error) {
//			return rap.Text("Hello, " + in.Name), nil
//		})
//	err := s.ListenAndServe(ctx, "127.0.0.1:3001")
//
// A handler's error, panic or cancellation becomes an ordinary result whose
// text starts with "Error: ", so the model always learns how the call
// ended. Through its *Call a handler can ask for authorization
// (RequestOAuth), ask the user (AskUser) and update a view (UpdateView).
//
// Callbacks are delivered by a Sender that retries transient failures. By
// default they live in memory; with ServerOptions.Store (package
// rap/durable keeps one in SQLite) every result waits in a durable outbox
// until the runtime accepts it, every accepted call is journaled so that a
// crash still ends it with a result (or resumes it, for a handler that
// saved where it stands with Call.SaveState), and subscriptions resume
// after a restart. ServerOptions also sets the bearer token inbound requests need,
// the bounds on workers, queue, bodies and subscriptions, and the HTTP
// limits (HTTPLimits) that keep slow or idle clients from holding memory
// or locking other clients out.
//
// The decoders (DecodeInvocation, DecodeCallback and the Decode functions
// of the small request bodies) are strict where the protocol is, name the
// field at fault in a *FieldError, refuse duplicate keys, and otherwise
// accept what the reference implementation accepts (docs/compatibility.md).
// ParseToolset and Toolset.Validate check manifests; a Catalog merges
// several toolsets for a runtime. Package raptest provides a fake runtime
// for testing tool servers over real HTTP.
package rap
