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
//     deltas go to subscribers only;
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
// (asked again after a restart), and the OAuth links shown to clients
// (never stored, RAP OA-1); deadlines are rows too. On a store several
// processes share (PostgreSQL, store.Shared) the claim is also a lease row
// renewed while the worker runs, timers are claimed before they fire, and
// a sweep takes the work other processes left (leases.go, issue 14).
package runtime
