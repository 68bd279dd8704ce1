package runtime

// This file owns the Runtime itself: its Config, New, Start (recovery of
// queued threads and undispatched calls, then the background loops) and
// Shutdown. The package's map of files is in doc.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// Limits on what the runtime accepts.
const (
	// MaxMessageBytes bounds the text of one user message.
	MaxMessageBytes = api.MaxMessageBytes
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
	// ToolsetPins verifies the discovery documents of tool servers, by
	// base URL as in ToolServers (RAP TS-11): a document that does not
	// match its pin is refused, and its tools are not offered in the
	// session. "rap serve" sets it from the "sha256" and "pin" members of
	// toolset_server entries (docs/config.md).
	ToolsetPins map[string]ToolsetPin
	// ConfirmDestructive asks the user (a user choice: Allow / Deny,
	// default Deny) before dispatching a call of a tool annotated
	// destructive (RAP TS-3); Deny ends the call with an error result and
	// the tool is never invoked. "rap serve" sets it from
	// security.confirm_external_actions.
	ConfirmDestructive bool
	// PublicURL is the base URL tools call back to, such as
	// http://127.0.0.1:8080; callback URLs are PublicURL + "/rap/callback/" + token.
	PublicURL string
	// Secret is the HMAC key of callback tokens; see LoadOrCreateSecret. At
	// least 16 bytes. With KeysFromStore it is only the key stored when the
	// store has none yet (may be empty: a random one).
	Secret []byte
	// KeysFromStore takes the callback keys from the store, so that every
	// process sharing it accepts the callbacks of the others, and
	// RotateCallbackKey works; see SharedCallbackKeys.
	KeysFromStore bool
	// LeaseTTL is how long a thread's lease in a store several processes
	// share (PostgreSQL) lives without renewal: a thread whose process died is
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
	// ContextWindow is the model's context window in tokens, which bounds
	// what a request carries of each tool result (MaxResultShare). Zero
	// takes the window the provider declares (model.WindowReporter) or
	// the one the model table gives for its name (model.ContextWindow);
	// when neither knows, model.DefaultContextWindow (128,000), which Start
	// logs. rap serve sets it with --context-window (RAP_CONTEXT_WINDOW,
	// rap.json "context_window").
	ContextWindow int
	// MaxResultShare is the share of the context window one tool result
	// may take in a model request, above 0 and at most 1; zero means
	// DefaultMaxResultShare (0.1). A longer result is sent as its start
	// and its end with a note saying how much was left out
	// (model.BoundResult); the store and the client API keep it whole.
	// rap serve sets it with --max-result-share (RAP_MAX_RESULT_SHARE,
	// rap.json "max_result_share").
	MaxResultShare float64
	// MaxImagesPerRequest is how many images of tool results one model
	// request carries, the newest; each older one is sent as a note
	// saying it was left out. Zero means DefaultMaxImagesPerRequest (20);
	// negative sends every image.
	MaxImagesPerRequest int
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
	// AllowedHosts are host names (or host:port) that client API requests
	// may name in their Host header besides loopback names, IP literals
	// and PublicURL's host: the names of a reverse proxy or a cluster
	// service. "*.example.com" allows every subdomain; "*" turns the check
	// off. A request naming any other host is refused, which keeps a web
	// page whose DNS name is rebound to this runtime's address from using
	// it (see Runtime.WebGuard).
	AllowedHosts []string
	// AllowedOrigins are origins (scheme://host[:port]) whose pages may
	// call the client API from another origin, such as a separate front
	// end. By default only the runtime's own pages may.
	AllowedOrigins []string
	// ClientAuth, when set, guards the client API (/v1) of Handler: it
	// wraps the API's handler, answers a request it does not accept
	// itself (401), and marks one it accepts with the Caller it acts for
	// (WithCaller). clientauth.Authenticator.Handler is one. The callback
	// endpoint is never wrapped: each callback URL carries its own token.
	ClientAuth func(next http.Handler) http.Handler
	// Retention, when positive, deletes closed sessions nobody touched
	// for that long: a session whose threads are all closed and whose
	// newest last activity (the Created time of a thread's last message,
	// or of the thread itself without one) is older than Retention is
	// deleted as DeleteSession deletes it, by a sweep that runs every
	// Retention/10 (at least every hour, at most every second). Zero
	// keeps sessions for ever. rap serve sets it with --retention
	// (RAP_RETENTION, rap.json "retention").
	Retention time.Duration
	// InsecureClientAPI, when true and ClientAuth is nil, serves the
	// client API to every address that reaches it. By default a runtime
	// without ClientAuth answers the client API only to requests from
	// loopback addresses (403 otherwise), so that a program embedding the
	// runtime never exposes every conversation to the network by mistake.
	InsecureClientAPI bool
	// ToolsetBudgets are budgets per session by tool server base URL, for
	// the tools of that server whose definition carries no budget of its
	// own (AnnotationBudget); budgets.go says how they are counted.
	ToolsetBudgets map[string]ToolBudget
	// SessionBudget bounds the model use of each session: once the
	// completions of a session's threads used its tokens or cost its
	// dollars, the model is not asked again in that session
	// (sessionbudget.go). The zero value is no limit.
	SessionBudget SessionBudget
	// Prices are models' prices per million tokens, by model name
	// (without the provider), over the list prices gorap knows
	// (model.NewPriceTable): budgets in dollars count spend at them.
	Prices map[string]model.Price
	// Compaction sets when threads are compacted to stay within their
	// model's context window (compact.go); the zero value compacts at
	// DefaultCompactionShare of the model's window.
	Compaction CompactionConfig
	// Remotes are runtimes sessions may move to by name (MoveSession,
	// rap migrate --to NAME), with their client tokens.
	Remotes map[string]Remote
	// MoveForwardFor is how long the runtime keeps forwarding what still
	// reaches it for a session that moved away (tools' results and events
	// sent to the old callback URLs); zero means DefaultMoveForwardFor.
	MoveForwardFor time.Duration
	// Metrics, when set, is told what the runtime does (completions,
	// slices, invocations, callbacks, store transactions) and reads what
	// it counts when scraped (metrics.go); runtime/metrics.New makes one
	// on a Prometheus registry. Nil: nothing is counted, at no cost.
	Metrics Metrics
	// MetricsHandler, when set, is served at GET /metrics by Handler,
	// behind the same authentication as the client API; a Caller bound
	// to one user (not an admin) gets 403, since metrics count every
	// user's sessions.
	MetricsHandler http.Handler
	// TracerProvider, when set, makes the runtime's OpenTelemetry spans
	// (tracing.go): slices, completions, dispatches (whose span context
	// goes to the tool server in the W3C traceparent header), callbacks
	// and built-in calls. Nil: no spans and no trace headers, at no cost.
	TracerProvider trace.TracerProvider
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
	// moves are the sessions moving away or gone (move_table.go);
	// testMigrateTimeout, when set, replaces migrateTimeout.
	moves              moveTable
	compacted          compactions // the compaction each thread's requests use
	testMigrateTimeout atomic.Int64
	// keys are the callback keys read from the store (KeysFromStore), and
	// keysRead when (Unix ns) they were last read (callbackkeys.go).
	keys     atomic.Pointer[store.CallbackKeys]
	keysRead atomic.Int64
	// coord is what differs between a runtime alone on its store and one
	// of several processes sharing it (coord.go); New picks it.
	coord coord
	// metrics is Config.Metrics, nil when none (metrics.go).
	metrics Metrics
	// tracer is Config.TracerProvider's, nil when none; links are the
	// callbacks' span contexts kept for the next slice (tracing.go).
	tracer    trace.Tracer
	links     spanLinks
	chatSpans completionSpans

	cfg Config
	// store is Config.Store, its transactions timed when metrics are on
	// (timedStore): ask optional interfaces of cfg.Store.
	store store.Store
	model model.Provider
	log   *slog.Logger
	http  *http.Client
	retry RetryPolicy
	hub   *hub
	hist  *historyCache
	// window is the model's context window in tokens and windowFrom where
	// it came from; maxResultTokens and maxImages bound each request
	// (bounds.go).
	window          int
	windowFrom      windowSource
	maxResultTokens int
	maxImages       int
	// serverCompactAt is the input tokens at which the model's provider
	// compacts a thread, 0 when gorap's compaction runs
	// (compact_provider.go).
	serverCompactAt int
	// retries knows which threads may have a model retry timer (modelcall.go).
	retries retryTimers
	// prices are the model prices budgets in dollars count spend at;
	// tally keeps the usage of the threads whose spend was read
	// (sessionbudget.go).
	prices *model.PriceTable
	tally  usageTally

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
	changed   chan struct{}            // closed on any state change; nil while no one waits
	catalogs  map[string]*session      // discovered toolsets per root thread
	built     map[string]*builtCatalog // catalogs by manifest-set hash
	wg        sync.WaitGroup
	baseCtx   context.Context
	cancel    context.CancelFunc
	timerKick chan struct{}
	// heldSince is set once this process held a subscription event: only
	// then may a plain tool_result have held events to discard at once
	// (events held before a restart are found by sweepHeldEvents).
	heldSince atomic.Bool
	// confirmed holds the calls the user allowed (ConfirmDestructive)
	// until they are dispatched; see confirm.go.
	confirmed sync.Map
	// confirmRunning holds the allowed calls whose dispatch is under way,
	// so that another dispatch of the same call (Start's, racing the
	// answer) neither invokes it again nor asks the user again.
	confirmRunning sync.Map
}

// threadState is the in-memory state of a thread that has a worker.
type threadState struct {
	again bool // more inbox rows were committed while the worker ran
}

// New checks the Config and returns a Runtime. It does no I/O; call Start.
// It fills in the defaults on its own copy: the caller's Config is never
// changed (its slices and maps are read, and must not change afterwards).
func New(opts *Config) (*Runtime, error) {
	if opts == nil {
		return nil, errors.New("runtime config: none given; give a *Config with at least Store, Model, Secret and PublicURL")
	}
	cfg := *opts // the caller's Config is never changed
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
	if cfg.Retention < 0 {
		problems = append(problems, fmt.Sprintf("Retention is %v: must not be negative (0 keeps sessions for ever)", cfg.Retention))
	}
	if cfg.DefaultToolTimeout < 0 {
		problems = append(problems, fmt.Sprintf("DefaultToolTimeout is %v: must not be negative", cfg.DefaultToolTimeout))
	}
	problems = append(problems, checkToolsetPins(cfg.ToolServers, cfg.ToolsetPins)...)
	problems = append(problems, checkBounds(&cfg)...)
	prices, spendProblems := checkSpend(&cfg)
	problems = append(problems, spendProblems...)
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
		catalogs:  map[string]*session{},
		built:     map[string]*builtCatalog{},
		timerKick: make(chan struct{}, 1),
		prices:    prices,
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.http == nil {
		r.http = &http.Client{Transport: NewTransport()}
	}
	r.setBounds()
	if err := r.setCompaction(); err != nil {
		return nil, fmt.Errorf("runtime config: %w", err)
	}
	r.checks.kick = make(chan struct{}, 1)
	r.baseCtx, r.cancel = context.WithCancel(context.Background())
	r.workers = newLingerPool(r.baseCtx, &r.wg, workerLinger)
	// The one place that asks whether other processes share the store.
	if sh, ok := cfg.Store.(store.Shared); ok && sh.SharedByProcesses() {
		r.coord = newSharedCoord(r, cfg, sh.StoreID())
	} else {
		r.coord = newLocalCoord(r)
	}
	if cfg.TracerProvider != nil {
		r.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	if cfg.Metrics != nil {
		r.metrics = cfg.Metrics
		r.store = timedStore{Store: cfg.Store, m: cfg.Metrics}
		cfg.Metrics.Watch(r.watched())
	}
	return r, nil
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

	if err := r.recoverMoves(ctx); err != nil {
		return fmt.Errorf("runtime start: read the journal of moving sessions: %w", err)
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
	r.logContextWindow()
	r.logPrice()
	r.logCompaction()
	for _, c := range undispatched {
		r.dispatchAsync(c, nil)
	}
	for _, id := range queued {
		r.wake(id)
	}
	r.wg.Add(1)
	go r.timeoutLoop()
	if r.cfg.Retention > 0 {
		r.wg.Add(1)
		go r.retentionLoop() // retention.go
	}
	r.coord.start()
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

// signal wakes everyone waiting in Idle. r.mu must be held.
// The channel is made only when someone waits (see changedLocked): most
// changes have no waiter.
func (r *Runtime) signalLocked() {
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// changedLocked returns a channel closed at the next signalLocked. r.mu
// must be held.
func (r *Runtime) changedLocked() <-chan struct{} {
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.changed
}
