// Package runtime is the gorap agent runtime: it keeps conversations
// (threads) durably in a store, runs model completions one slice at a time
// per thread, dispatches the model's tool calls to RAP tool servers, and
// receives their results on an authenticated callback endpoint.
//
// # Slices
//
// Everything that wakes a thread is a row in the store's inbox: a user
// message, a tool result (from a callback, a failed dispatch or a timeout),
// a subscription event. A thread has a worker goroutine only while it has
// inbox rows (RAP RT-2: one slice at a time per thread, threads run
// concurrently; an idle thread costs rows, not a goroutine). A slice
// (RAP RT-1):
//
//  1. reads all queued inbox rows of the thread as one batch;
//  2. runs a streamed completion over the history plus the batch; text
//     deltas go to subscribers only (on a shared store also to those of
//     other processes, through the store's notifications, never stored);
//  3. in one transaction appends the batch and the assistant turn to the
//     history, records the turn's tool calls as pending, and consumes the
//     batch from the inbox — so a crash leaves either nothing or all of it;
//  4. dispatches the turn's calls concurrently (after the commit, so a tool
//     always finds the turn in the history);
//  5. repeats while more rows arrived, else the worker exits.
//
// A call to an unknown tool or with arguments that fail the tool's input
// schema is not dispatched: it gets an error result at once, and when no
// call of the turn was dispatched the completion runs again in the same
// slice. If the model fails (or hangs past Config.ModelIdleTimeout or
// Config.ModelTimeout), nothing is consumed: the batch stays in the inbox
// (RAP RT-4) and a durable timer retries it with backoff, up to
// Config.ModelRetry.Attempts times; after that the next message retries it.
//
// A batch made only of tool results while other calls of the same turn are
// still pending is appended without a completion: the model is asked once
// all results of a turn are in, or earlier when the user writes (RAP RT-3).
//
// # History sent to the model
//
// Tool results are stored where they arrive, so a result can come after a
// later user message. When the runtime builds a model request it places
// every result that arrived before the next user or assistant message right
// after its call. A call whose result had not arrived by then gets a
// placeholder result saying it is still running, and its real result, when
// it comes, is shown to the model at its arrival position as a user note
// ("Result of the earlier call …"). The history sent to a model therefore
// always has a result for every tool call, as Anthropic and OpenAI require.
// This is arrange.go; model.Normalize, which those providers run on every
// request after it, repairs conversations built elsewhere (arrange.go says
// why the two are not one).
//
// What a request carries of each result is bounded (bounds.go): a result
// whose text is estimated to take more than Config.MaxResultShare of the
// model's context window is sent as its start and its end with a note,
// and only the newest Config.MaxImagesPerRequest images are sent. The
// store and the client API keep every result whole, and the same history
// always gives the same request.
//
// # Threads, subscriptions and built-in tools
//
// A thread may have child threads (see docs/threads.md). A child inherits
// its parent's history up to its creation (shared in the store, not
// copied), runs concurrently with it, and reports back through the
// parent's inbox as a synthetic call of InjectedToolName. Children are made
// by the built-in spawn_thread and, one per event, for every subscription
// event not marked associative (RAP SU-6); associative events are injected
// inline. The built-in tools (BuiltinTools, RAP BT-1 to BT-7) run inside the
// slice's commit transaction: the synchronous ones answer at once and the
// model runs again in the same slice; sleep and sleep_until leave a pending
// call and a durable timer row whose firing delivers the result exactly
// once. A user message first interrupts the thread's pending calls (RAP
// CA-1); closing a thread tells every tool server (RAP TC-1).
//
// # Durability and scale-out
//
// Every write that matters is one store transaction: accepting a message
// or a callback commits its inbox row before the HTTP answer; a slice
// consumes its batch in the transaction that appends the history it
// produced; a result's inbox row and its call's state change commit
// together, and a result, a dispatch failure and a timeout share one dedup
// key, so the first wins (RAP RE-6). A crash at any point leaves either the
// state before or the state after a step. Calls saved but not yet accepted
// by their tool are dispatched again at Start; tools may thus see an
// invocation twice and answer it once.
//
// Inside one process a thread has at most one worker. Nothing about a
// thread lives only in memory except that claim, the cached catalogs and
// session user ids, the tool servers found not to answer tool_call_status
// (asked again after a restart), and, on a store one process holds, the
// client events kept for resuming and the OAuth links shown to clients
// (RAP OA-1); deadlines are rows too.
//
// # One process or several
//
// A runtime is either the only process on its store (SQLite) or one of
// several sharing it (PostgreSQL). What differs is one seam, coord.go,
// which New picks once from the store: the local implementation
// (coord_local*.go) keeps claims and client events in memory; the shared
// one (coord_shared*.go) also holds a lease row per thread renewed while
// the worker runs, claims timers before they fire, hears other processes'
// wake-ups, sweeps for the work they left, and stores client events so
// that the clients of any process follow them. The engine calls the seam
// and never asks which mode it runs in.
//
// # Packages around the engine
//
// Each package under runtime/ owns one thing, and imports point one way
// (docs/packages.md draws them; internal/archtest enforces them):
//
//   - runtime/api: the client API's types, its own structs apart from
//     the stored records, pinned by golden files; also what the engine and
//     its HTTP surface share (Caller, the errors, EventStream).
//   - runtime/httpapi: the HTTP surface — the client API under /v1 and
//     its event stream, the callback endpoint, the browser checks, the
//     client-auth gate, the health endpoints and NewHTTPServer. It does
//     not import runtime: it drives httpapi.Engine, which *Runtime
//     implements with exported methods only (http.go: Handler), so a Go
//     program can do whatever the HTTP API does.
//   - runtime/client: a Go client of the client API; it imports api only.
//   - runtime/clientauth: bearer tokens for the client API, given to the
//     engine as Config.ClientAuth.
//   - runtime/metrics: the Prometheus metrics, given to the engine as
//     Config.Metrics (docs/observability.md).
//   - runtime/config: rap serve's settings and the tool-server files.
//   - runtime/store: the store interfaces and records; store/backend, the
//     logic of a store that is not SQL, written once; store/sqlite and
//     store/postgres, the SQL; store/storetest, the conformance suite.
//   - runtime/archive: the session archive format (versioned JSON
//     Lines); archive/archivestore moves sessions between a store and an
//     archive.
//   - runtime/bench and runtime/crashtest: the load harness and the
//     SIGKILL tests.
//
// # Files
//
// Each file begins with a comment saying what it owns. By concern:
//
//   - The Runtime: runtime.go (Config, New, Start, Shutdown),
//     streamlimits.go (the bounds of event streams), health.go
//     (readiness), http.go (Handler and the forwarders to
//     runtime/httpapi), gopool.go (the goroutine pool of workers and
//     dispatches), metrics.go (what Config.Metrics is told, the timed
//     store, the census of the store for the store-wide gauges),
//     tracing.go (the spans of Config.TracerProvider and the trace
//     context sent with invocations).
//   - Inputs from clients: threadapi.go (create a thread, post a message,
//     history, Idle), close.go (closing a thread), delete.go (deleting a
//     session) with delete_forget.go (forgetting it in memory) and
//     retention.go (deleting old closed sessions), choices.go (answering a
//     user choice), confirm.go (the runtime's confirmation of destructive
//     tools), userid.go (session user ids), caller.go (a Caller sees only
//     its user's threads, in the Go API and over HTTP), threadpage.go
//     (the answers the client API sends as they are: a new session, a page
//     of threads, a thread's state), events_follow.go (a client's stream of
//     a thread's events: replay or resume, then live). runtime/httpapi
//     serves them over HTTP. What they return is runtime/api's types:
//     apiconv.go converts store records into them.
//   - Inputs from tools: callback.go (DeliverCallback: checking and
//     applying a callback), callbackkeys.go (callback tokens and their keys),
//     callback_events.go (subscription events), callback_urls.go (URLs a
//     tool hands over).
//   - One process or several: coord.go (the seam), coord_local.go and
//     coord_local_events.go (alone on a store: claims, event ids and the
//     resume logs in memory), coord_shared.go (leases and timer claims on
//     a shared store), coord_shared_leasehold.go (a worker's hold of its
//     lease), coord_shared_sweep.go (the sweep), coord_shared_wakeups.go
//     (wake-ups across processes), coord_shared_events.go and
//     coord_shared_events_loops.go (client events in the store),
//     coord_shared_deltas.go (text deltas across processes).
//   - Claim and slice: claim.go (wake and the worker loop), slice.go (one
//     slice and its commit), batch.go (inbox rows into a batch),
//     interrupts.go (RAP CA-1), turn.go (the model's answer into a turn),
//     effects.go (what runs after a commit).
//   - The model: discovery.go (toolsets and a session's catalog),
//     request.go (the request), arrange.go (the history fix-up for the
//     model), bounds.go (the context window and what a request carries of
//     each result), histcache.go (the history cache), modelcall.go (the
//     completion, its time limits and retries), usage.go (token usage).
//   - Tool calls: dispatch.go (invocations), timers.go (durable timers and
//     call deadlines), callstatus.go and callstatus_ask.go (asking about
//     silent calls), children.go (child threads), builtin.go (the built-in
//     tools and execBuiltin) with one function per built-in in
//     builtin_sleep.go, builtin_threads.go and builtin_subscriptions.go.
//   - Sessions as a whole: archiveio.go (export and import through a
//     session archive, runtime/archive), move_out.go (moving a session to
//     another runtime: pause, prepare, /migrate, send, forward),
//     move_in.go (a session arriving from another runtime),
//     move_recover.go (a move a restart interrupted; what reaches a moving
//     or moved session), move_table.go (the moving and moved sessions in
//     memory, and the gate inputs pass), move_forget.go, remotes.go.
//     docs/migration.md describes the protocol.
//   - Events to clients: events.go (event types, emit, announce), hub.go
//     (subscribers and their queues), events_attach.go (attaching a
//     subscriber, resets and the replay marker); how events are numbered
//     and kept is the seam's (above).
//
// # One tool result through the code
//
// A tool POSTs a tool_result to the callback URL of its call:
//
//  1. Handler (http.go: httpapi.New) routes POST /rap/callback/{token}
//     to httpapi's serveCallback, which hands the token and the bounded
//     body to DeliverCallback (callback.go). It checks the token
//     (verifyToken, callbackkeys.go) before it reads the body, then
//     decodes it.
//  2. handleCallback (callback.go), in one store transaction, moves the
//     call from pending to done and, if it moved, enqueues the result as
//     an inbox row of the thread (applyCallback; a failed dispatch or a
//     timeout does the same, so the first of them wins: resultDedupKey in
//     dispatch.go).
//     After the commit it runs the callback's effects (apply, effects.go).
//  3. DeliverCallback calls wake (claim.go), and then serveCallback
//     answers 200. On a shared store the row's commit also notifies the
//     other processes
//     (coord_shared_wakeups.go); the sweep (coord_shared_sweep.go)
//     catches a missed notification.
//  4. wake gives the thread a worker, or tells the running one to look
//     again; work (claim.go) claims the thread through the seam
//     (coord.claimThread) — on a shared store its lease
//     (coord_shared_leasehold.go), renewed while it runs and checked on
//     the clock before each model request and in each commit — and runs
//     slices until the inbox is empty (or the claim is lost).
//  5. slice (slice.go) loads the thread, its queued rows and its history
//     (histcache.go) and decodes the rows (decodeBatch, batch.go). A
//     result while another call of its turn is pending is saved without a
//     completion (needsCompletion); a user message among the inputs first
//     interrupts the pending calls (interrupts.go).
//  6. buildRequest (request.go) arranges the history for the model
//     (arrangeFrom, arrange.go); complete (modelcall.go) runs the
//     completion, sending its text deltas to clients as they stream
//     (deltaStream, events.go); planTurn (turn.go) makes the turn.
//  7. commit (slice.go), in one transaction, appends the inputs and the
//     turn, runs the turn's built-in calls (execBuiltin, builtin.go),
//     records the accepted calls as pending and consumes the rows.
//  8. After the commit, announce (events.go) publishes the saved messages,
//     apply (effects.go) runs the effects of the built-ins, and
//     dispatchAsync (dispatch.go) sends the new calls. When every call of
//     the turn was answered at once the model runs again (step 6).
//  9. Events reach clients through the hub (hub.go; numbered and kept by
//     the seam: in memory, coord_local_events.go, or on a shared store
//     through the store, coord_shared_events.go) and FollowEvents
//     (events_follow.go), which httpapi's event stream writes out.
package runtime
