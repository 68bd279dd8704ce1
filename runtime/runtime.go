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

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/gorap/gorap/internal/privfile"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// Limits on what the runtime accepts.
const (
	// MaxMessageBytes bounds the text of one user message.
	MaxMessageBytes = 256 << 10
	// MaxCallbackBytes bounds a callback body (RAP TR-5); larger bodies get
	// 413. It is the SDK's limit, so a gorap tool never sends what the
	// runtime refuses.
	MaxCallbackBytes = rap.MaxCallbackBytes
	// MaxLoopsPerSlice bounds how often one slice may run the model again
	// after rejected calls, so a model that keeps calling unknown tools
	// cannot spin forever.
	MaxLoopsPerSlice = 8
)

// RetryPolicy sets how dispatch retries an invocation that failed with a
// connection error or a 5xx answer (RAP TR-3). The n-th retry waits
// min(Max, Initial·2ⁿ⁻¹) plus up to 20% jitter.
type RetryPolicy struct {
	// Initial is the first backoff; zero means 200 ms.
	Initial time.Duration
	// Max caps each backoff; zero means 5 s.
	Max time.Duration
	// Attempts is the total number of POSTs, the first included; zero means 5.
	Attempts int
	// AttemptTimeout bounds one POST; zero means 30 s.
	AttemptTimeout time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Initial <= 0 {
		p.Initial = 200 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 5 * time.Second
	}
	if p.Attempts <= 0 {
		p.Attempts = 5
	}
	if p.AttemptTimeout <= 0 {
		p.AttemptTimeout = 30 * time.Second
	}
	return p
}

// Config configures a Runtime. Store and Model are required.
type Config struct {
	// Store keeps every thread durably.
	Store store.Store
	// Model runs completions.
	Model model.Provider
	// ToolServers are the base URLs of the RAP tool servers (RAP TS-4).
	ToolServers []string
	// ConfirmDestructive asks the user (a user choice: Allow / Deny,
	// default Deny) before dispatching a call of a tool annotated
	// destructive (RAP TS-3); Deny ends the call with an error result and
	// the tool is never invoked (issue 12 item 7). "rap serve" sets it from
	// security.confirm_external_actions.
	ConfirmDestructive bool
	// PublicURL is the base URL tools call back to, such as
	// http://127.0.0.1:8080; callback URLs are PublicURL + "/rap/callback/" + token.
	PublicURL string
	// Secret is the HMAC key of callback tokens; see LoadOrCreateSecret. At
	// least 16 bytes. With KeysFromStore it is only the key stored when the
	// store has none yet (may be empty: a random one).
	Secret []byte
	// KeysFromStore takes the callback keys from the store (issue 14 item
	// 5), so that every process sharing it accepts the callbacks of the
	// others, and RotateCallbackKey works; see SharedCallbackKeys.
	KeysFromStore bool
	// LeaseTTL is how long a thread's lease in a shared store (see
	// store.Shared) lives without renewal: a thread whose process died is
	// taken by another within it plus SweepEvery. Zero means
	// DefaultLeaseTTL. Unused on a store one process holds (SQLite).
	// rap serve sets it with --lease-ttl (RAP_LEASE_TTL), at least 1s.
	LeaseTTL time.Duration
	// SweepEvery is how often a runtime on a shared store looks for queued
	// threads no process holds and for timers and deadlines other
	// processes wrote. Zero means DefaultSweepEvery. rap serve sets it
	// with --sweep-every (RAP_SWEEP_EVERY).
	SweepEvery time.Duration
	// HTTPClient is used for discovery and dispatch; nil means a client
	// without an overall timeout (each dispatch attempt has its own).
	HTTPClient *http.Client
	// Logger receives the runtime's logs and the audit log (RAP RT-6); nil
	// means slog.Default().
	Logger *slog.Logger
	// System is the system prompt.
	System string
	// MaxTokens bounds each completion; zero means 4096.
	MaxTokens int
	// ToolTimeouts maps a tool name to how long the runtime waits for its
	// result before recording a synthetic error result (RAP RT-5).
	ToolTimeouts map[string]time.Duration
	// DefaultToolTimeout applies to tools not in ToolTimeouts; zero means no
	// timeout (the protocol sets none, RAP IN-4).
	DefaultToolTimeout time.Duration
	// DispatchRetry is the retry policy of invocations (RAP TR-3).
	DispatchRetry RetryPolicy
	// DisplayText renders a call for people; script is the tool's
	// displayScript (maybe empty). Nil, or an empty return, means the
	// default "name(args-json)".
	DisplayText func(toolName, script string, args json.RawMessage) string
	// MaxSubscriptionsPerThread bounds the active subscriptions of one
	// thread (RAP SU-8); zero means DefaultMaxSubscriptionsPerThread. A
	// subscription over the limit is cancelled at once and the model gets
	// an error result saying so.
	MaxSubscriptionsPerThread int
	// HistoryCacheThreads is how many threads' histories the engine keeps
	// in memory, so that a slice reads only what was added since the
	// thread's previous slice; zero means 1024, negative turns the cache off.
	HistoryCacheThreads int
	// ChoiceResponseHosts lists hosts, besides the tool's own, to which
	// the runtime may POST a user's answer to a user_choice (RAP UC-2). By
	// default a response_url must be an http(s) URL on the host and port
	// of the toolset endpoint the call was dispatched to; an entry "host"
	// allows every port of host, "host:port" one port.
	ChoiceResponseHosts []string
	// ModelIdleTimeout cuts a completion whose answer stream has sent
	// nothing (no text, no tool-call piece, no keep-alive) for this long;
	// zero means DefaultModelIdleTimeout (60 s), negative turns it off.
	// The completion then fails and is retried per ModelRetry.
	ModelIdleTimeout time.Duration
	// ModelTimeout bounds one whole completion; zero means
	// DefaultModelTimeout (10 min), negative turns it off.
	ModelTimeout time.Duration
	// ModelRetry sets how a failed completion is retried on its own.
	ModelRetry ModelRetryPolicy
	// Secrets are values the runtime knows are secret (API keys, tokens):
	// each is replaced by "[redacted]" in the model errors it logs and
	// sends to clients. Values shorter than 8 bytes are not masked.
	Secrets []string
	// Streams bounds the client API's event streams: bytes queued per
	// subscriber, write timeout, streams per thread and in total. Zero
	// fields take the defaults (see StreamLimits).
	Streams StreamLimits
	// DefaultUserID is the user id of sessions created without one (see
	// CreateThreadFor); every invocation of a session carries its user id
	// as user_id (RAP IN-1, IN-5). Empty means none is sent.
	DefaultUserID string
	// CallStatusAfter is how long a dispatched call or an active
	// subscription may stay silent before the runtime asks its tool server
	// POST {base}/tool_call_status about it; zero means
	// DefaultCallStatusAfter, negative turns the checks off.
	CallStatusAfter time.Duration
}

// NewTransport returns the HTTP transport the runtime uses when
// Config.HTTPClient is nil: net/http's default transport, but keeping up to
// 256 idle connections per tool server instead of 2. Many threads invoking
// one tool server at once would otherwise open (and leave in TIME_WAIT) a
// new TCP connection for most invocations.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	return t
}

// DefaultMaxSubscriptionsPerThread is the per-thread subscription limit
// when Config.MaxSubscriptionsPerThread is zero.
const DefaultMaxSubscriptionsPerThread = 32

// Runtime is a running agent runtime. Create it with New, call Start, mount
// Handler, and call Shutdown when done. Its methods are safe for concurrent
// use.
type Runtime struct {
	usage usageTotals // token usage per thread since start (usage.go)
	// keys are the callback keys read from the store (KeysFromStore), and
	// keysRead when (Unix ns) they were last read (callbackkeys.go).
	keys     atomic.Pointer[store.CallbackKeys]
	keysRead atomic.Int64
	// shared is the runtime's part in a store several processes share
	// (leases.go).
	shared sharedState

	cfg   Config
	store store.Store
	model model.Provider
	log   *slog.Logger
	http  *http.Client
	retry RetryPolicy
	hub   *hub
	hist  *historyCache
	// retries knows which threads may have a model retry timer (modelcall.go).
	retries retryTimers

	// users caches the user ids of sessions; checks is the call status
	// sweep's state (callstatus.go).
	users  userCache
	checks statusChecker

	mu        sync.Mutex
	started   bool
	stopping  bool
	threads   map[string]*threadState  // threads with a live worker
	workers   *lingerPool              // runs threads' slices and dispatches
	inflight  map[string]int           // dispatches in flight per thread
	failed    map[string]error         // threads whose last slice failed, kept queued
	changed   chan struct{}            // closed and replaced on any state change
	catalogs  map[string]*session      // discovered toolsets per root thread
	built     map[string]*builtCatalog // catalogs by manifest-set hash
	wg        sync.WaitGroup
	baseCtx   context.Context
	cancel    context.CancelFunc
	timerKick chan struct{}
	// authShown holds the oauth events of calls still waiting for their
	// result, to show to clients that connect later; never stored
	// (RAP OA-1).
	authShown map[string]map[string]Event
	// heldSince is set once this process held a subscription event: only
	// then may a plain tool_result have held events to discard at once
	// (events held before a restart are found by sweepHeldEvents).
	heldSince atomic.Bool
	// confirmed holds the calls the user allowed (ConfirmDestructive)
	// until they are dispatched; see confirm.go.
	confirmed sync.Map
}

// threadState is the in-memory state of a thread that has a worker.
type threadState struct {
	again bool // more inbox rows were committed while the worker ran
}

// New checks cfg and returns a Runtime. It does no I/O; call Start.
func New(cfg Config) (*Runtime, error) {
	var problems []string
	if cfg.Store == nil {
		problems = append(problems, "Store is nil: open one with runtime/store/sqlite.Open")
	}
	if cfg.Model == nil {
		problems = append(problems, "Model is nil: give a model.Provider (for tests, model/scripted)")
	}
	if len(cfg.Secret) < 16 && (!cfg.KeysFromStore || len(cfg.Secret) > 0) {
		problems = append(problems, fmt.Sprintf("Secret has %d bytes, need at least 16: use LoadOrCreateSecret", len(cfg.Secret)))
	}
	if cfg.PublicURL == "" {
		problems = append(problems, "PublicURL is empty: give the base URL tools call back to, such as http://127.0.0.1:8080")
	} else if !strings.HasPrefix(cfg.PublicURL, "http://") && !strings.HasPrefix(cfg.PublicURL, "https://") {
		problems = append(problems, fmt.Sprintf("PublicURL %q must start with http:// or https://", cfg.PublicURL))
	}
	if err := checkUserID(cfg.DefaultUserID); err != nil {
		problems = append(problems, "DefaultUserID: "+err.Error())
	}
	for name, d := range cfg.ToolTimeouts {
		if d <= 0 {
			problems = append(problems, fmt.Sprintf("ToolTimeouts[%q] is %v: must be positive (leave the tool out for no timeout)", name, d))
		}
	}
	if cfg.DefaultToolTimeout < 0 {
		problems = append(problems, fmt.Sprintf("DefaultToolTimeout is %v: must not be negative", cfg.DefaultToolTimeout))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("runtime config: %s", strings.Join(problems, "; "))
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 4096
	}
	if cfg.CallStatusAfter == 0 {
		cfg.CallStatusAfter = DefaultCallStatusAfter
	}
	if cfg.MaxSubscriptionsPerThread <= 0 {
		cfg.MaxSubscriptionsPerThread = DefaultMaxSubscriptionsPerThread
	}
	r := &Runtime{
		cfg:       cfg,
		store:     cfg.Store,
		model:     cfg.Model,
		log:       cfg.Logger,
		http:      cfg.HTTPClient,
		retry:     cfg.DispatchRetry.withDefaults(),
		hub:       newHub(cfg.Streams),
		hist:      newHistoryCache(cfg.HistoryCacheThreads),
		threads:   map[string]*threadState{},
		inflight:  map[string]int{},
		failed:    map[string]error{},
		changed:   make(chan struct{}),
		catalogs:  map[string]*session{},
		built:     map[string]*builtCatalog{},
		timerKick: make(chan struct{}, 1),
		authShown: map[string]map[string]Event{},
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.http == nil {
		r.http = &http.Client{Transport: NewTransport()}
	}
	r.checks.kick = make(chan struct{}, 1)
	r.shared = newSharedState(cfg)
	if r.shared.on {
		r.hub.sh = newSharedEvents() // issue 14 item 4: events in the store
	}
	r.baseCtx, r.cancel = context.WithCancel(context.Background())
	r.workers = newLingerPool(r.baseCtx, &r.wg, workerLinger)
	return r, nil
}

// LoadOrCreateSecret returns the callback-token key kept in
// dataDir/callback.key, creating it (32 random bytes, mode 0600 whatever
// the umask) on first use, and dataDir (mode 0700) when missing. A key
// file that others may read, as an older gorap left it, is made 0600 when
// the file system allows it.
func LoadOrCreateSecret(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, "callback.key")
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) < 16 {
			return nil, fmt.Errorf("callback secret %s has %d bytes, need at least 16: delete it to create a new one (pending callbacks will then be refused)", path, len(b))
		}
		// Best effort: a key mounted read-only stays usable.
		_ = privfile.Restrict(path)
		return b, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read callback secret: %w", err)
	}
	if err := privfile.MkdirAll(dataDir); err != nil {
		return nil, fmt.Errorf("create data dir for the callback secret: %w", err)
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generate callback secret: %w", err)
	}
	f, err := privfile.OpenFile(path, os.O_WRONLY|os.O_EXCL)
	if errors.Is(err, os.ErrExist) {
		return LoadOrCreateSecret(dataDir) // another process created it first
	}
	if err != nil {
		return nil, fmt.Errorf("create callback secret: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("write callback secret %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("sync callback secret %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("close callback secret %s: %w", path, err)
	}
	return b, nil
}

// Start recovers and begins processing: it resumes every thread whose inbox
// has rows, dispatches calls that were persisted but not yet accepted by
// their tool, and starts the timeout timer (RAP RT-5). It returns once
// recovery is under way.
func (r *Runtime) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return errors.New("runtime: Start called twice")
	}
	r.started = true
	r.mu.Unlock()
	if r.cfg.KeysFromStore {
		if err := r.loadKeys(ctx); err != nil {
			return fmt.Errorf("runtime start: %w", err)
		}
	}

	var queued []string
	var undispatched []store.Call
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		if queued, err = tx.QueuedThreads(); err != nil {
			return err
		}
		if undispatched, err = tx.CallsInState(store.CallNew); err != nil {
			return err
		}
		timers, err := tx.DueTimers(time.Unix(0, math.MaxInt64))
		if err == nil {
			r.retries.load(timers)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("runtime start: recover state (RAP RT-4: stopping): %w", err)
	}
	r.log.Info("runtime starting", "model", r.model.Name(), "tool_servers", len(r.cfg.ToolServers),
		"threads_with_queued_messages", len(queued), "calls_to_dispatch", len(undispatched))
	for _, c := range undispatched {
		r.dispatchAsync(c, nil)
	}
	for _, id := range queued {
		r.wake(id)
	}
	r.wg.Add(1)
	go r.timeoutLoop()
	if r.shared.on {
		r.wg.Add(1)
		go r.sweepLoop() // issue 14: work other processes left
		r.startWakeListener()
	}
	if r.hub.sh != nil {
		r.startSharedEvents()
	}
	return r.startCallStatus(ctx)
}

// Shutdown stops workers, dispatches and timers, waiting for them until ctx
// ends. Work that was not finished stays in the store and resumes at the
// next Start.
func (r *Runtime) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	r.cancel()
	r.hub.closeAll()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("runtime shutdown: workers still running: %w", ctx.Err())
	}
}

// CreateThread creates a root thread (a new session) for the configured
// default user (Config.DefaultUserID), discovers its toolsets (RAP TS-4 to
// TS-7) and returns its id. Discovery problems do not fail the call: they
// are logged and reported as a "toolsets" event.
func (r *Runtime) CreateThread(ctx context.Context) (string, error) {
	return r.CreateThreadFor(ctx, "")
}

// CreateThreadFor is CreateThread for the end user userID: every
// invocation of the session, its child threads' included, carries it as
// user_id (RAP IN-1), so tools that keep credentials per user find them.
// An empty userID means Config.DefaultUserID. The caller vouches for the
// id: take it only from an authenticated client or trusted configuration.
func (r *Runtime) CreateThreadFor(ctx context.Context, userID string) (string, error) {
	if err := checkUserID(userID); err != nil {
		return "", fmt.Errorf("%w: user_id %v", ErrBadInput, err)
	}
	if userID == "" {
		userID = r.cfg.DefaultUserID
	}
	id := store.NewThreadID()
	th := store.Thread{ID: id, RootID: id, Status: store.ThreadActive, UserID: userID}
	if err := r.store.Update(ctx, func(tx store.Tx) error { return tx.CreateThread(th) }); err != nil {
		return "", fmt.Errorf("create thread: %w", err)
	}
	r.discover(ctx, id)
	return id, nil
}

// PostMessage adds a user message to the thread's inbox and wakes it. It
// returns once the message is durable; the thread processes it
// asynchronously (at once, even while tool calls are pending: RAP RT-3).
func (r *Runtime) PostMessage(ctx context.Context, threadID, text string) error {
	_, err := r.postMessage(ctx, threadID, text, "")
	return err
}

// ErrUnknownThread is returned (wrapped) for a thread id that does not exist.
var ErrUnknownThread = errors.New("unknown thread")

// ErrBadInput is returned (wrapped) for input the runtime refuses.
var ErrBadInput = errors.New("bad input")

// postMessage enqueues a user message; with a non-empty idempotency key a
// repeated key adds nothing and reports added=false.
func (r *Runtime) postMessage(ctx context.Context, threadID, text, idemKey string) (added bool, err error) {
	if strings.TrimSpace(text) == "" {
		return false, fmt.Errorf("%w: message text is empty; send {\"text\": \"...\"}", ErrBadInput)
	}
	if len(text) > MaxMessageBytes {
		return false, fmt.Errorf("%w: message text has %d bytes, the limit is %d", ErrBadInput, len(text), MaxMessageBytes)
	}
	key := "user:" + uuid.NewString()
	if idemKey != "" {
		key = "user:" + threadID + ":" + idemKey
	}
	payload, _ := json.Marshal(store.UserMessage{Text: text})
	err = r.store.Update(ctx, func(tx store.Tx) error {
		th, err := tx.Thread(threadID)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w %q", ErrUnknownThread, threadID)
			}
			return err
		}
		if th.Status == store.ThreadClosed {
			return fmt.Errorf("%w: thread %s is closed; create a new thread", ErrBadInput, threadID)
		}
		added, err = tx.Enqueue(store.InboxItem{ThreadID: threadID, Kind: store.KindUserMessage, Payload: payload, DedupKey: key})
		return err
	})
	if err != nil {
		return false, err
	}
	if added {
		r.wake(threadID)
	}
	return added, nil
}

// History returns the thread's messages in order.
func (r *Runtime) History(ctx context.Context, threadID string) ([]store.Message, error) {
	var msgs []store.Message
	err := r.store.View(ctx, func(tx store.Tx) error {
		if _, err := tx.Thread(threadID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w %q", ErrUnknownThread, threadID)
			}
			return err
		}
		var err error
		msgs, err = tx.History(threadID)
		return err
	})
	return msgs, err
}

// Threads lists every thread, oldest first.
func (r *Runtime) Threads(ctx context.Context) ([]store.Thread, error) {
	var out []store.Thread
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.ListThreads()
		return err
	})
	return out, err
}

// Idle waits until the thread has no running slice, no dispatch in flight
// and an empty inbox, or until ctx ends. Tool calls waiting for their
// results do not count: a thread waiting for a tool is idle. If the last
// slice failed (say, the model was unreachable) its inputs stay queued and
// Idle returns an error wrapping ErrSliceFailed.
func (r *Runtime) Idle(ctx context.Context, threadID string) error {
	for {
		r.mu.Lock()
		ch := r.changed
		_, running := r.threads[threadID]
		busy := running || r.inflight[threadID] > 0
		failed := r.failed[threadID]
		r.mu.Unlock()
		if !busy && failed != nil {
			return fmt.Errorf("thread %s: %w: %v", threadID, ErrSliceFailed, failed)
		}
		if !busy {
			var queued []store.InboxItem
			err := r.store.View(ctx, func(tx store.Tx) error {
				var err error
				queued, err = tx.Queued(threadID)
				return err
			})
			if err != nil {
				return err
			}
			if len(queued) == 0 {
				return nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for thread %s to be idle: %w", threadID, ctx.Err())
		case <-time.After(250 * time.Millisecond):
			// Re-check: a model failure leaves rows queued until the next
			// message, so Idle must not wait for a change forever.
		}
	}
}

// signal wakes everyone waiting in Idle. r.mu must be held.
func (r *Runtime) signalLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}
