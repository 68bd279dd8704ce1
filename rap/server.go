package rap

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/internal/webguard"
)

// Defaults of ServerOptions.
const (
	// DefaultWorkers is ServerOptions.Workers when it is zero.
	DefaultWorkers = 64
	// DefaultQueue is ServerOptions.Queue when it is zero.
	DefaultQueue = 1024
	// DefaultMaxBodyBytes is ServerOptions.MaxBodyBytes when it is zero.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxSubscriptions is ServerOptions.MaxSubscriptions when it is
	// zero.
	DefaultMaxSubscriptions = 10000
	// MaxIDBytes is the longest thread or tool call id that /close_thread
	// and /cancel_tool_call act on (RAP TC-2).
	MaxIDBytes = 256
)

// Paths a Server answers, relative to its base URL.
const (
	InvokePath             = "/invoke"
	CloseThreadPath        = "/close_thread"
	CancelToolCallPath     = "/cancel_tool_call"
	MigratePath            = "/migrate"
	ToolCallStatusPath     = "/tool_call_status"
	UserChoiceResponsePath = "/user_choice_response"
)

// ServerOptions configures a Server. The zero value (or nil) is usable: an
// in-memory server without authentication.
type ServerOptions struct {
	// Description is the toolset's description in the manifest.
	Description string
	// Endpoint is the manifest's endpoint, the URL invocations are POSTed
	// to. Empty means PublicURL, or else the base URL the discovery
	// request reached (its Host and X-Forwarded-Proto).
	Endpoint string
	// BearerToken, when set, is required as "Authorization: Bearer <token>"
	// on every inbound request except discovery (RAP CA-3, TR-8). A user
	// choice response may instead carry the per-choice key its
	// response_url holds.
	BearerToken string
	// CallbackHeader is added to outbound callbacks whose URL is on one of
	// CallbackOrigins, for example the credentials the runtime expects
	// (RAP TR-7). Start fails when it is set and CallbackOrigins is empty.
	CallbackHeader http.Header
	// CallbackOrigins lists the runtime origins ("scheme://host:port",
	// such as "https://runtime.example.com") that receive CallbackHeader.
	// A callback_url on another origin still gets its callbacks, without
	// the header, so a caller cannot harvest the runtime's credentials by
	// naming its own URL (see SenderOptions.HeaderOrigins).
	CallbackOrigins []string
	// Store keeps callbacks and subscriptions durably. Nil keeps them in
	// memory: callbacks then wait in a bounded in-memory outbox
	// (MaxMemoryQueue per destination) delivered in the background, so a
	// handler's worker is free as soon as it returns even while its
	// runtime is unreachable, and they and the subscriptions end with
	// the process. With a Store, callbacks go through a durable outbox
	// delivered in the background, and subscriptions resume after a
	// restart. Either way, callbacks that cannot be delivered are
	// dead-lettered (Server.DeadLetters).
	Store Store
	// NoCallJournal, with a Store that keeps a CallJournal (rap/durable
	// does), leaves it unused. By default every invocation is recorded,
	// synced to disk, before it is acknowledged, so that a call running
	// when the process dies is answered with an error result by the next
	// Start instead of leaving the runtime waiting for ever; that costs
	// the acknowledgement a sync (docs/benchmarks.md). Set it when a lost
	// call is acceptable, or the runtime's per-tool timeout covers it.
	NoCallJournal bool
	// Workers is how many handlers run at once; zero means DefaultWorkers.
	Workers int
	// Queue is how many accepted invocations may wait for a worker; zero
	// means DefaultQueue. When workers and queue are full, invocations get
	// 503 with Retry-After and the runtime retries them (RAP TR-3).
	Queue int
	// MaxSubscriptions bounds the subscriptions that run at once, each a
	// goroutine with what its handler holds; zero means
	// DefaultMaxSubscriptions. A subscribing call over the limit gets an
	// "Error: " result that says so. Subscriptions resumed by Start count
	// but are never refused.
	MaxSubscriptions int
	// MaxBodyBytes bounds every request body; zero means
	// DefaultMaxBodyBytes. Larger bodies get 413.
	MaxBodyBytes int64
	// HTTP bounds the connections Serve and ListenAndServe accept:
	// timeouts, the minimum body rate, header size and how many are open
	// at once. The zero value takes the defaults
	// (DefaultReadHeaderTimeout, DefaultMinBodyRate, DefaultMaxConns,
	// ...). A program serving the Server itself gets the same limits from
	// NewHTTPServer and LimitListener.
	HTTP HTTPLimits
	// MaxBodyBytesInFlight bounds the request body bytes held by all
	// requests whose bodies are being read, so that many clients sending
	// large bodies slowly cannot pin MaxBodyBytes each; zero means
	// DefaultMaxBodyBytesInFlight, negative means no bound. A request
	// that would pass it gets 503 with Retry-After.
	MaxBodyBytesInFlight int64
	// Logger receives the server's logs; nil means slog.Default(). The
	// server logs ids and operation names, never tokens, arguments or
	// OAuth URLs; callback URLs appear only redacted (see RedactURL).
	Logger *slog.Logger
	// Retry is the backoff policy for callback delivery; its GiveUpAfter
	// is the maximum retry age before a callback is dead-lettered
	// (default DefaultMaxRetryAge).
	Retry RetryPolicy
	// HTTPClient sends callbacks; nil means a client that keeps an idle
	// connection per worker to each runtime.
	HTTPClient *http.Client
	// Migrator, when set, serves POST /migrate and makes the manifest say
	// needsMigration: true (RAP MI-1). It must return only once the
	// destination holds the session's state.
	Migrator func(ctx context.Context, req *MigrateRequest) error
	// PublicURL is the server's base URL as the runtime reaches it, used to
	// build user choices' response_url. Empty means the base URL each
	// invocation request reached. Set it when a proxy rewrites the host.
	PublicURL string
	// AllowedHosts are host names (or host:port) that requests reaching
	// the server on a loopback address without a BearerToken may name in
	// their Host header, besides loopback names, IP addresses and
	// PublicURL's host; "*" turns the check off. See Server.ServeHTTP.
	AllowedHosts []string
	// Metrics, when set, gets the server's Prometheus metrics: its
	// invocations, results, callback deliveries, callbacks waiting for
	// delivery and active subscriptions, labelled with the toolset's
	// name (docs/observability.md). Several servers may share one
	// registry; serve it yourself (promhttp.HandlerFor). Nil, the
	// default: no metrics. NewServer panics when registering fails (a
	// second server of the same name on the registry).
	Metrics prometheus.Registerer
	// TracerProvider, when set, gives each call's handler an
	// OpenTelemetry span, the child of the span context its invocation's
	// traceparent header carried (docs/observability.md). Nil, the
	// default: no spans. The trace context headers are sent back with the
	// call's callbacks either way.
	TracerProvider trace.TracerProvider
}

// Server is a RAP tool server. It is an http.Handler that answers:
//
//	GET  /.well-known/rap-toolset  the manifest (RAP TS-4)
//	POST / and POST /invoke        invocations (RAP IN-1)
//	POST /close_thread             thread closure (RAP TC-1)
//	POST /cancel_tool_call         tool cancellation (RAP CA-1)
//	POST /migrate                  session migration (RAP MI-1)
//	POST /tool_call_status         whether a call is still alive (gorap)
//	POST /user_choice_response     answers to Call.AskUser (RAP UC-2)
//
// Add tools with AddTool, AddRawTool and AddSubscription, call Start, then
// serve it (mounted under a path prefix with http.StripPrefix if needed).
// Every invocation is answered 200 before its handler runs (RAP TR-2,
// IN-3) and ends in exactly one tool result sent to its callback_url (RAP
// IN-4, RE-1). Call Shutdown to stop.
type Server struct {
	name   string
	tracer trace.Tracer // ServerOptions.TracerProvider's; nil when none
	opts   ServerOptions
	hosts  *webguard.Policy // host names it answers to (webguard.go)
	log    *slog.Logger
	sender *Sender
	subs   SubscriptionStore
	// subIndex is subs, remembering which subscriptions are stored for
	// /tool_call_status.
	subIndex *subscriptionIndex
	// journal records accepted calls until their result is stored, when
	// the Store keeps one (CallJournal).
	journal CallJournal
	pool    *pool
	// metrics are the server's metrics (metrics.go); nil without
	// ServerOptions.Metrics.
	metrics *serverMetrics

	// baseCtx is the parent of every handler and subscription context;
	// Shutdown cancels it with ErrServerShutdown.
	baseCtx context.Context
	stop    context.CancelCauseFunc
	// deliverCtx bounds callback delivery; it ends when Shutdown's
	// deadline passes.
	deliverCtx   context.Context
	stopDelivery context.CancelFunc

	started   atomic.Bool  // Start completed: invocations are served
	bodyBytes atomic.Int64 // request body bytes being read (MaxBodyBytesInFlight)
	lastBase  atomic.Pointer[baseCache]
	emptyArgs sync.Map // *Schema → emptyArgsResult: see validateArgs
	// routes are the routes added with Handle, replaced whole.
	routes atomic.Pointer[map[string]http.Handler]

	mu       sync.Mutex
	runStop  context.CancelFunc // stops the sender loop; set by Start
	runDone  chan struct{}      // closed when the sender loop returned
	starting bool               // Start is reading the stored subscriptions
	closing  bool
	tools    map[string]*toolEntry
	order    []string
	active   map[string]map[string]activeCall    // group_id → id → call
	idleMaps []map[string]activeCall             // emptied per-group maps, reused by register
	choices  map[string]*pendingAsk[int]         // invocation id → pending AskUser
	inputs   map[string]*pendingAsk[InputAnswer] // invocation id → pending AskInput
	subsWG   sync.WaitGroup                      // running subscription handlers; Add only under mu while !closing
	nsubs    int                                 // subscriptions holding a slot (MaxSubscriptions)
}

// activeCall is an invocation or subscription whose context is live.
type activeCall struct {
	cancel context.CancelCauseFunc
	// call is the invocation's Call once it is made (nil for a resumed
	// subscription): its result is being sent once call.sent is set.
	call *Call
}

// NewServer returns a server for the toolset called name (1 to 128
// characters, RAP TS-1). opts may be nil.
func NewServer(name string, opts *ServerOptions) *Server {
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.MaxSubscriptions <= 0 {
		o.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	switch {
	case o.MaxBodyBytesInFlight == 0:
		o.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	case o.MaxBodyBytesInFlight < 0:
		o.MaxBodyBytesInFlight = 0 // no bound
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.PublicURL = strings.TrimSuffix(o.PublicURL, "/")
	s := &Server{
		name:    name,
		opts:    o,
		hosts:   newHostPolicy(o),
		log:     o.Logger,
		pool:    newPool(o.Workers, o.Queue),
		tools:   map[string]*toolEntry{},
		active:  map[string]map[string]activeCall{},
		choices: map[string]*pendingAsk[int]{},
		inputs:  map[string]*pendingAsk[InputAnswer]{},
	}
	client := o.HTTPClient
	if client == nil {
		// Every worker may deliver a callback at once: keep a connection
		// for each, or most callbacks would dial a new one.
		client = callbackClient(max(s.pool.workers, MaxInFlight))
	}
	// As many callbacks to one runtime at once as workers can produce.
	so := SenderOptions{Client: client, Header: o.CallbackHeader, HeaderOrigins: o.CallbackOrigins, Retry: o.Retry, Logger: o.Logger,
		PerDestination: max(s.pool.workers, MaxInFlight)}
	if o.Store != nil {
		so.Outbox = o.Store
		s.subIndex = newSubscriptionIndex(o.Store)
		if !o.NoCallJournal {
			s.journal, _ = o.Store.(CallJournal)
		}
	} else {
		so.Outbox = newMemoryOutbox()
		s.subIndex = newSubscriptionIndex(newMemorySubscriptions())
	}
	s.subs = s.subIndex
	s.sender = NewSender(so)
	s.sender.onGone = s.subscriptionGone
	if o.TracerProvider != nil {
		s.tracer = o.TracerProvider.Tracer(tracerName)
	}
	if o.Metrics != nil {
		m, err := newServerMetrics(o.Metrics, s)
		if err != nil {
			panic(fmt.Sprintf("rap: NewServer %q: register its metrics: %v", name, err))
		}
		s.metrics, s.sender.metrics = m, m
	}
	s.baseCtx, s.stop = context.WithCancelCause(context.Background())
	s.deliverCtx, s.stopDelivery = context.WithCancel(context.Background())
	return s
}

// Start readies the server: it starts callback delivery from the durable
// outbox (when ServerOptions.Store is set) and resumes every stored
// subscription, calling its handler with Subscription.Resumed true. Start
// must be called once before the server handles invocations; until then
// they get 503. Delivery stops at Shutdown, and with a Store also when ctx
// ends (what is left stays in the outbox for the next Start).
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return errors.New("rap: Server.Start called after Shutdown; create a new Server with NewServer")
	case s.starting || s.runDone != nil:
		s.mu.Unlock()
		return errors.New("rap: Server.Start called twice; call it once before serving")
	case s.sender.configErr != nil:
		s.mu.Unlock()
		return fmt.Errorf("rap: Start of toolset %q: %w", s.name, s.sender.configErr)
	}
	s.starting = true
	s.mu.Unlock()
	recs, err := s.subs.ListSubscriptions(ctx)
	s.mu.Lock()
	s.starting = false
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("rap: Start: listing stored subscriptions of toolset %q: %w; check that the Store is reachable, then call Start again", s.name, err)
	}
	loopCtx := ctx
	if s.opts.Store == nil {
		// The in-memory outbox is lost with the process: keep
		// delivering until Shutdown has flushed it, even after ctx ends.
		loopCtx = s.deliverCtx
	}
	runCtx, runStop := context.WithCancel(loopCtx)
	runDone := make(chan struct{})
	s.runStop, s.runDone = runStop, runDone
	s.mu.Unlock()
	go func() {
		defer close(runDone)
		if err := s.sender.Run(runCtx); err != nil && runCtx.Err() == nil {
			s.log.Error("rap: callback delivery loop stopped", "toolset", s.name, "error", err)
		}
	}()
	if err := s.answerUnfinished(ctx, recs); err != nil {
		runStop()
		<-runDone
		s.mu.Lock()
		s.runStop, s.runDone = nil, nil
		s.mu.Unlock()
		return fmt.Errorf("rap: Start: answering the calls that were running when toolset %q last stopped: %w; check that the Store is reachable, then call Start again", s.name, err)
	}
	s.resumeSubscriptions(ctx, recs)
	s.started.Store(true)
	return nil
}

// Shutdown stops the server: new invocations get 503, every handler and
// subscription context is cancelled with ErrServerShutdown, and Shutdown
// waits for the handlers to return and their results to be sent. Stored
// subscriptions stay stored, to be resumed by the next Start. Shutdown
// then waits for the outbox to drain; whatever is still undelivered when
// ctx ends stays in a durable Store's outbox for the next Start (without
// a Store it is lost).
// Shutdown returns ctx's error if it ends first.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	runStop, runDone := s.runStop, s.runDone
	s.mu.Unlock()
	s.stop(ErrServerShutdown)
	defer s.stopDelivery()
	stopOnExpiry := context.AfterFunc(ctx, s.stopDelivery)
	defer stopOnExpiry()

	done := make(chan struct{})
	go func() {
		s.pool.close()
		s.subsWG.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("rap: shutdown of toolset %q: %d invocation(s) still running when the deadline passed: %w", s.name, s.pool.inFlight(), ctx.Err())
	}
	if err == nil && runDone != nil {
		if ferr := s.sender.Flush(ctx); ferr != nil {
			fate := "stay in the outbox for the next Start"
			if s.opts.Store == nil {
				fate = "are lost (the server has no Store)"
			}
			err = fmt.Errorf("rap: shutdown of toolset %q: undelivered callbacks %s: %w", s.name, fate, ferr)
		}
	}
	if runDone != nil {
		runStop()
		select {
		case <-runDone:
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("rap: shutdown of toolset %q: callback delivery did not stop in time: %w", s.name, ctx.Err())
			}
		}
	}
	return err
}

// ShutdownGrace is how long Serve and ListenAndServe give handlers and
// callback delivery to finish once their context ends.
const ShutdownGrace = 30 * time.Second

// ListenAndServe listens on the TCP address addr and calls Serve.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("rap: toolset %q: listening on %s: %w", s.name, addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve starts the server (see Start), serves HTTP on ln until ctx ends,
// and then shuts down: the listener closes, and handlers and callback
// delivery get up to ShutdownGrace to finish. It returns nil after a clean
// shutdown. Connections are bounded by ServerOptions.HTTP: timeouts,
// header size, and how many are open at once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.Start(ctx); err != nil {
		_ = ln.Close()
		return err
	}
	hs := NewHTTPServer(s, s.opts.HTTP, s.log)
	ln = LimitListener(ln, s.opts.HTTP.withDefaults().MaxConns, s.log)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var err error
	select {
	case err = <-served:
		err = fmt.Errorf("rap: toolset %q: serving on %s: %w", s.name, ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
	defer cancel()
	if herr := hs.Shutdown(sctx); herr != nil && err == nil {
		err = fmt.Errorf("rap: toolset %q: closing the listener: %w", s.name, herr)
	}
	if serr := s.Shutdown(sctx); serr != nil && err == nil {
		err = serr
	}
	return err
}

// ServeHTTP routes a request to the discovery, invocation, close_thread,
// cancel_tool_call, migrate, tool_call_status or user_choice_response
// endpoint, or to a route added with Handle.
//
// No web page can make a browser use the server (see refuseBrowser): a
// request a browser sends for another site's page gets 403, a POST whose
// Content-Type is not application/json gets 415, and, on a loopback
// address without a BearerToken, a request naming a host the server does
// not answer to (a DNS name rebound to 127.0.0.1) gets 403.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if ref := s.refuseBrowser(r); ref != nil {
		http.Error(w, ref.Message, ref.Status)
		return
	}
	if h := s.extraRoutes()[r.URL.Path]; h != nil {
		h.ServeHTTP(w, r) // added with Handle
		return
	}
	switch r.URL.Path {
	case WellKnownPath:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET, HEAD")
			return
		}
		s.serveDiscovery(w, r)
		return
	case "/", InvokePath, CloseThreadPath, CancelToolCallPath, MigratePath, ToolCallStatusPath, UserChoiceResponsePath, UserInputResponsePath:
	default:
		http.Error(w, fmt.Sprintf("no RAP endpoint at %q; invocations go to POST / (or /invoke), the manifest is at GET %s", r.URL.Path, WellKnownPath), http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	if r.URL.Path == UserChoiceResponsePath {
		s.serveUserChoiceResponse(w, r) // authenticates with the bearer token or the choice's key
		return
	}
	if r.URL.Path == UserInputResponsePath {
		s.serveUserInputResponse(w, r) // likewise, with the question's key
		return
	}
	if !s.authorized(r) {
		bearer.Challenge(w.Header(), "rap")
		http.Error(w, "missing or wrong bearer token: send the header \"Authorization: Bearer <token>\" configured for this tool server", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case CloseThreadPath:
		s.serveCloseThread(w, r)
	case CancelToolCallPath:
		s.serveCancel(w, r)
	case MigratePath:
		s.serveMigrate(w, r)
	case ToolCallStatusPath:
		s.serveToolCallStatus(w, r)
	default:
		s.serveInvoke(w, r)
	}
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	http.Error(w, "method not allowed; use "+allow, http.StatusMethodNotAllowed)
}

// authorized checks the bearer token in constant time (RAP CA-3).
func (s *Server) authorized(r *http.Request) bool {
	if s.opts.BearerToken == "" {
		return true
	}
	return s.bearerOK(r)
}

func (s *Server) bearerOK(r *http.Request) bool {
	if s.opts.BearerToken == "" {
		return false
	}
	token, ok := bearer.FromRequest(r)
	return ok && equalSecret(token, s.opts.BearerToken)
}

// equalSecret compares a presented secret with the expected one in time
// that depends on neither's content nor length: both are hashed first, as
// subtle.ConstantTimeCompare returns at once on a length mismatch.
func equalSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// readBody reads a request body of at most MaxBodyBytes. On failure it has
// already answered (413, 400, or 503 past MaxBodyBytesInFlight) and
// reports false.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	br := s.budgeted(r.Body)
	defer br.release()
	body, err := io.ReadAll(http.MaxBytesReader(w, io.NopCloser(br), s.opts.MaxBodyBytes))
	if err != nil {
		if errors.Is(err, errBodyBudget) {
			s.overBudget(w)
			return nil, false
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("request body is over the %d-byte limit of this tool server", s.opts.MaxBodyBytes), http.StatusRequestEntityTooLarge)
			return nil, false
		}
		http.Error(w, "could not read the request body: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return body, true
}

// Invocation bodies are read into pooled buffers: the decoded invocation
// copies what it keeps, so the buffer goes back to the pool as soon as the
// body is parsed. Buffers that grew past bodyPoolMax are left to the
// garbage collector rather than kept.
const (
	bodyPoolInitial = 2 << 10
	bodyPoolMax     = 64 << 10
)

var bodyPool = sync.Pool{New: func() any {
	b := make([]byte, 0, bodyPoolInitial)
	return &b
}}

// readPooledBody is readBody into a buffer from bodyPool, which the caller
// gives back with putBody once nothing refers to the bytes any more. The
// MaxBodyBytes limit and its 413 answer are those of readBody.
func (s *Server) readPooledBody(w http.ResponseWriter, r *http.Request) (*[]byte, bool) {
	limit := s.opts.MaxBodyBytes
	if r.ContentLength > limit {
		_, ok := s.readBody(w, r) // answers 413 as it always has
		return nil, ok
	}
	br := s.budgeted(r.Body)
	defer br.release()
	bp := bodyPool.Get().(*[]byte)
	b := (*bp)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow
		}
		n, err := br.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			*bp = b
			putBody(bp)
			// Like http.MaxBytesReader: the rest of the body is not read,
			// so the connection cannot be reused.
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("request body is over the %d-byte limit of this tool server", limit), http.StatusRequestEntityTooLarge)
			return nil, false
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			*bp = b
			putBody(bp)
			if errors.Is(err, errBodyBudget) {
				s.overBudget(w)
				return nil, false
			}
			http.Error(w, "could not read the request body: "+err.Error(), http.StatusBadRequest)
			return nil, false
		}
	}
	*bp = b
	return bp, true
}

func putBody(bp *[]byte) {
	if cap(*bp) <= bodyPoolMax {
		*bp = (*bp)[:0]
		bodyPool.Put(bp)
	}
}

// serveDiscovery answers GET /.well-known/rap-toolset (RAP TS-4).
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	endpoint := s.opts.Endpoint
	if endpoint == "" {
		endpoint = s.opts.PublicURL
	}
	if endpoint == "" {
		endpoint = requestBase(r)
	}
	body, err := json.Marshal(s.Toolset(endpoint))
	if err != nil {
		s.log.Error("rap: encoding the manifest", "toolset", s.name, "error", err)
		http.Error(w, "could not encode the manifest", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(body)
}

// requestBase is the base URL a request reached: scheme, host, and the
// path prefix a mux stripped (seen by comparing RequestURI with URL.Path).
func requestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if fp := r.Header.Get("X-Forwarded-Proto"); fp != "" {
		first, _, _ := strings.Cut(fp, ",")
		if p := strings.ToLower(strings.TrimSpace(first)); p == "http" || p == "https" {
			scheme = p
		}
	}
	prefix := ""
	if r.RequestURI != r.URL.Path { // else nothing was stripped: no prefix
		if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
			if p, ok := strings.CutSuffix(u.Path, r.URL.Path); ok {
				prefix = strings.TrimSuffix(p, "/")
			}
		}
	}
	return scheme + "://" + r.Host + prefix
}

// baseCache remembers the last base URL built by invocationBase, since
// consecutive invocations almost always reach the same one.
type baseCache struct{ host, base string }

// invocationBase is requestBase for an invocation, reusing the previous
// invocation's string when the parts are the same.
func (s *Server) invocationBase(r *http.Request) string {
	if r.TLS != nil || r.RequestURI != r.URL.Path || r.Header.Get("X-Forwarded-Proto") != "" {
		return requestBase(r)
	}
	if c := s.lastBase.Load(); c != nil && c.host == r.Host {
		return c.base
	}
	base := requestBase(r)
	s.lastBase.Store(&baseCache{host: r.Host, base: base})
	return base
}

// serveInvoke answers POST / (RAP IN-3): 400 for a payload without a
// usable callback_url, group_id and id, 503 when saturated, and otherwise
// 200 before any work is done.
func (s *Server) serveInvoke(w http.ResponseWriter, r *http.Request) {
	if !s.started.Load() {
		http.Error(w, "tool server not started: the program must call (*rap.Server).Start before serving", http.StatusServiceUnavailable)
		return
	}
	bp, ok := s.readPooledBody(w, r)
	if !ok {
		return
	}
	inv, invalid, err := parseInvocation(*bp)
	putBody(bp) // inv holds copies of what it keeps
	if err != nil {
		s.countInvocation("", metricInvalid)
		http.Error(w, "invalid invocation: "+err.Error(), http.StatusBadRequest)
		return
	}
	if n, ok := s.sender.admit(r.Context(), inv.CallbackURL); !ok {
		s.countInvocation(inv.Operation, metricBusy)
		// The runtime has taken none of its queued callbacks for
		// MemoryAdmitWait: refuse its new calls rather than queue
		// without bound or hold workers. A runtime that takes them,
		// however slowly, only waited for room. Other runtimes are
		// served as usual.
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("tool server busy: %d callbacks to your callback_url's host wait for delivery and none was taken in the last %v; "+
			"check that the runtime answers its callback POSTs with 2xx, then retry this invocation after Retry-After", n, MemoryAdmitWait), http.StatusServiceUnavailable)
		return
	}
	if !s.pool.reserve() {
		s.countInvocation(inv.Operation, metricBusy)
		w.Header().Set("Retry-After", "1")
		msg := "tool server busy: all workers and queue slots are taken; retry later"
		if s.isClosing() {
			msg = "tool server shutting down; retry against another instance or later"
		}
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithCancelCause(s.baseCtx)
	if !s.register(inv.GroupID, inv.ID, cancel) {
		// The same call is already running: the runtime retried an
		// invocation whose acknowledgement it did not see (RAP TR-3).
		// Acknowledge again and let the first run send the one result.
		s.pool.release()
		cancel(nil)
		s.countInvocation(inv.Operation, metricDuplicate)
		w.WriteHeader(http.StatusOK)
		return
	}
	tc := traceContextOf(r.Header) // tracing.go
	journaled, err := s.beginCall(r.Context(), inv, tc)
	if err != nil {
		s.unregister(inv.GroupID, inv.ID)
		s.pool.release()
		cancel(nil)
		s.log.Error("rap: could not record an invocation in the call journal; answered 503", "toolset", s.name,
			"operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID, "error", err)
		s.countInvocation(inv.Operation, metricBusy)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "tool server could not record the call durably; retry later", http.StatusServiceUnavailable)
		return
	}
	base := s.opts.PublicURL
	if base == "" {
		base = s.invocationBase(r)
	}
	c := &Call{Invocation: inv, srv: s, baseURL: base, journaled: journaled, trace: tc}
	if s.metrics != nil {
		c.accepted = time.Now()
	}
	s.attach(inv.GroupID, inv.ID, c)
	s.countInvocation(inv.Operation, metricAccepted)
	// Acknowledge first, and only then hand the work over (RAP TR-2, IN-3).
	// An explicit empty length makes the flushed header the whole answer.
	w.Header()["Content-Length"] = contentLengthZero
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	} else {
		_ = http.NewResponseController(w).Flush() // a wrapped ResponseWriter
	}
	s.pool.submit(job{s: s, ctx: ctx, cancel: cancel, c: c, invalid: invalid})
}

// MaxJournalIDBytes bounds the group id, id and call id of a call the
// server records in its CallJournal; an invocation with a longer one runs
// unrecorded (rap/durable refuses longer ids).
const MaxJournalIDBytes = 1024

// beginCall records inv in the call journal, when there is one, before
// the invocation is acknowledged; it reports whether inv was recorded.
func (s *Server) beginCall(ctx context.Context, inv *Invocation, tc traceContext) (bool, error) {
	if s.journal == nil {
		return false, nil
	}
	if len(inv.GroupID) > MaxJournalIDBytes || len(inv.ID) > MaxJournalIDBytes || len(inv.CallID) > MaxJournalIDBytes {
		s.log.Warn("rap: an id of the invocation is too long for the call journal; the call runs unrecorded", "toolset", s.name,
			"limit", MaxJournalIDBytes)
		return false, nil
	}
	op := inv.Operation
	if len(op) > MaxJournalIDBytes {
		op = op[:MaxJournalIDBytes] // only named in the error result
	}
	err := s.journal.BeginCall(ctx, CallRecord{GroupID: inv.GroupID, ID: inv.ID, CallID: inv.CallID, Operation: op,
		CallbackURL: inv.CallbackURL, Accepted: time.Now(), TraceParent: tc.parent, TraceState: tc.state})
	return err == nil, err
}

// answerUnfinished answers each call the journal still holds, a call that
// was running when the previous process stopped, with an error result,
// and forgets it. A call whose handler saved a state (Call.SaveState) is
// resumed instead. A call that became a stored subscription, or was run by
// Invoke, is forgotten only: the subscription resumes, and a synchronous
// caller is gone.
func (s *Server) answerUnfinished(ctx context.Context, subs []SubscriptionRecord) error {
	// The store's journal, even with NoCallJournal: calls recorded before
	// it was set still get their answer.
	journal, ok := s.opts.Store.(CallJournal)
	if !ok {
		return nil
	}
	recs, err := journal.UnfinishedCalls(ctx)
	if err != nil {
		return err
	}
	subscribed := make(map[[2]string]bool, len(subs))
	for _, r := range subs {
		subscribed[[2]string{r.Invocation.GroupID, r.Invocation.ID}] = true
	}
	for _, r := range recs {
		if !subscribed[[2]string{r.GroupID, r.ID}] {
			if r.CallbackURL == "" {
				// A call run by Invoke: its caller's connection is gone.
				s.log.Warn("rap: a synchronous call (Server.Invoke) was running when the tool server stopped; its caller got no result", "toolset", s.name,
					"operation", r.Operation, "group_id", r.GroupID, "id", r.ID)
				if err := journal.EndCall(ctx, r.GroupID, r.ID); err != nil {
					return err
				}
				continue
			}
			if len(r.State) > 0 && s.resumeCall(r) {
				continue
			}
			res := errorResult(fmt.Sprintf("the tool server stopped (it crashed or was restarted) while %s was running, accepted at %s, so the call has no result. "+
				"Its work may be partly done: check before calling it again.", opName(r.Operation), r.Accepted.UTC().Format(time.RFC3339)))
			res.GroupID, res.ID, res.CallID = r.GroupID, r.ID, r.CallID
			if err := s.sender.sendEnding(withTrace(ctx, traceContext{r.TraceParent, r.TraceState}), r.CallbackURL, res, r.GroupID, r.ID, ""); err != nil {
				s.log.Error("rap: could not store the error result of a call interrupted by a restart; it is retried at the next Start", "toolset", s.name,
					"operation", r.Operation, "group_id", r.GroupID, "id", r.ID, "error", err)
				continue
			}
			s.log.Warn("rap: a call was running when the tool server stopped; it was answered with an error result", "toolset", s.name,
				"operation", r.Operation, "group_id", r.GroupID, "id", r.ID)
			continue
		}
		if err := journal.EndCall(ctx, r.GroupID, r.ID); err != nil {
			return err
		}
	}
	return nil
}

// contentLengthZero is the value of the acknowledgement's Content-Length
// header, shared by every answer: net/http only reads it.
var contentLengthZero = []string{"0"}

// parseInvocation decodes an invocation. err is set when the payload
// cannot be answered at all: it does not parse, or callback_url, group_id
// or id is unusable. invalid is set when the payload is answerable but
// another field is wrong; inv then holds what could be read.
func parseInvocation(body []byte) (inv *Invocation, invalid, err error) {
	if full, derr := DecodeInvocation(body); derr == nil {
		// The common case: one strict decode.
		if err := checkURL(full.CallbackURL); err != nil {
			return nil, nil, fmt.Errorf("callback_url: %w", err)
		}
		return full, nil, nil
	}
	if json.Valid(body) {
		// With a duplicate key the body is ambiguous, even
		// about where to send the result: refuse it whole.
		if err := duplicateKey(body); err != nil {
			return nil, nil, fmt.Errorf("the invocation has a duplicate key: %w", err)
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		if err == nil {
			err = errors.New("got null")
		}
		return nil, nil, fmt.Errorf("the body is not a JSON object (%v); send the invocation as a JSON object", err)
	}
	str := func(name string) (string, error) {
		raw, ok := m[name]
		if !ok || string(raw) == "null" {
			return "", fmt.Errorf("%s: missing required field", name)
		}
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return "", fmt.Errorf("%s: must be a string, got %s", name, jsonKind(raw))
		}
		if v == "" {
			return "", fmt.Errorf("%s: must not be empty", name)
		}
		return v, nil
	}
	cb, err := str("callback_url")
	if err != nil {
		return nil, nil, err
	}
	if err := checkURL(cb); err != nil {
		return nil, nil, fmt.Errorf("callback_url: %w", err)
	}
	group, err := str("group_id")
	if err != nil {
		return nil, nil, err
	}
	id, err := str("id")
	if err != nil {
		return nil, nil, err
	}
	full, derr := DecodeInvocation(body)
	if derr == nil {
		return full, nil, nil
	}
	inv = &Invocation{CallbackURL: cb, GroupID: group, ID: id}
	if raw, ok := m["call_id"]; ok {
		_ = json.Unmarshal(raw, &inv.CallID)
	}
	if raw, ok := m["operation"]; ok {
		_ = json.Unmarshal(raw, &inv.Operation)
	}
	return inv, derr, nil
}

// checkURL accepts an absolute http or https URL with a host.
func checkURL(raw string) error {
	if len(raw) > MaxCallbackURLBytes {
		return fmt.Errorf("is %d bytes, over the %d-byte limit", len(raw), MaxCallbackURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("does not parse as a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("has no host")
	}
	return nil
}

// register records a live call; it reports false if (group, id) is live.
func (s *Server) register(group, id string, cancel context.CancelCauseFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.active[group]
	if calls == nil {
		if n := len(s.idleMaps); n > 0 {
			calls = s.idleMaps[n-1]
			s.idleMaps = s.idleMaps[:n-1]
		} else {
			calls = map[string]activeCall{}
		}
		s.active[group] = calls
	}
	if _, dup := calls[id]; dup {
		return false
	}
	calls[id] = activeCall{cancel: cancel}
	return true
}

// attach records the Call of the live call (group, id), for
// /tool_call_status.
func (s *Server) attach(group, id string, c *Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.active[group][id]; ok {
		a.call = c
		s.active[group][id] = a
	}
}

// maxIdleMaps bounds the emptied per-group maps kept for reuse: a thread
// whose calls come one at a time would otherwise allocate a map per call.
const maxIdleMaps = 64

func (s *Server) unregister(group, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if calls := s.active[group]; calls != nil {
		delete(calls, id)
		if len(calls) == 0 {
			delete(s.active, group)
			if len(s.idleMaps) < maxIdleMaps {
				s.idleMaps = append(s.idleMaps, calls)
			}
		}
	}
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// runCall is the worker side of an invocation: validate, run the handler,
// send the one result.
func (s *Server) runCall(ctx context.Context, cancel context.CancelCauseFunc, c *Call, invalid error) {
	inv := c.Invocation
	handedOff := false // a subscription keeps its context and registration
	if s.tracer != nil {
		var span trace.Span
		ctx, span = s.startHandlerSpan(ctx, c) // tracing.go
		c.span = span
		defer span.End()
	}
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("rap: tool handler panicked",
				"toolset", s.name, "operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID,
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			c.finish(s.deliverCtx, errorResult(fmt.Sprintf(
				"%s failed unexpectedly inside the tool server. Try again; if it keeps failing, report it to the tool's maintainers.", opName(inv.Operation))))
		}
		if !handedOff {
			s.unregister(inv.GroupID, inv.ID)
			cancel(nil)
		}
	}()
	if invalid != nil {
		c.finish(s.deliverCtx, errorResult(fmt.Sprintf(
			"the invocation is malformed: %v. Send operation as a tool name and arguments as a JSON object, then call again.", invalid)))
		return
	}
	e, ok := s.lookup(inv.Operation)
	if !ok {
		// RAP IN-3, TS-10: an unknown (perhaps renamed) operation is an
		// ordinary error result.
		c.finish(s.deliverCtx, errorResult(fmt.Sprintf(
			"unknown operation %q; toolset %q has: %s. Reload the toolset and call one of those.",
			inv.Operation, s.name, strings.Join(s.toolNames(), ", "))))
		return
	}
	if err := s.validateArgs(e.schema, inv.Arguments); err != nil {
		// RAP IN-3, IN-5, TS-10: arguments made against another schema.
		detail := err.Error()
		var ae *ArgumentsError
		if errors.As(err, &ae) {
			detail = strings.Join(ae.Problems, "; ")
		}
		c.finish(s.deliverCtx, errorResult(fmt.Sprintf(
			"invalid arguments for %q: %s. Fix the arguments to match the tool's inputSchema and call it again.",
			inv.Operation, strings.TrimSuffix(detail, "."))))
		return
	}
	if e.prepare != nil {
		handedOff = s.startSubscription(ctx, cancel, c, e)
		return
	}
	rep, err := e.run(ctx, c, inv.Arguments)
	if c.leftToResume(err, context.Cause(ctx)) {
		s.log.Info("rap: a resumable call was stopped by Shutdown; the next Start resumes it", "toolset", s.name,
			"operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID)
		return
	}
	if err != nil {
		s.log.Info("rap: tool returned an error", "toolset", s.name, "operation", inv.Operation, "group_id", inv.GroupID, "id", inv.ID, "error", err)
		c.finish(s.deliverCtx, &ToolResult{Text: handlerErrorText(inv.Operation, err, context.Cause(ctx))})
		return
	}
	c.finish(s.deliverCtx, replyResult(rep))
}

// emptyArgsResult is a schema's verdict on the arguments {}.
type emptyArgsResult struct{ err error }

// validateArgs is schema.Validate(args). The verdict on {}, the arguments
// of every call to a tool without parameters, depends on the schema alone,
// so it is computed once per schema and remembered.
func (s *Server) validateArgs(schema *Schema, args json.RawMessage) error {
	if string(args) != "{}" {
		return schema.Validate(args)
	}
	if v, ok := s.emptyArgs.Load(schema); ok {
		return v.(emptyArgsResult).err
	}
	err := schema.Validate(args)
	s.emptyArgs.Store(schema, emptyArgsResult{err})
	return err
}

func opName(op string) string {
	if op == "" {
		return "the call"
	}
	return fmt.Sprintf("%q", op)
}

// validID reports whether a thread or tool call id from /close_thread or
// /cancel_tool_call is safe to use as a key: at most MaxIDBytes of valid
// UTF-8, no control characters, no path separators, not "." or ".."
// (RAP TC-2).
func validID(id string) error {
	switch {
	case id == "":
		return errors.New("is empty")
	case len(id) > MaxIDBytes:
		return fmt.Errorf("is %d bytes, over the %d-byte limit", len(id), MaxIDBytes)
	case !utf8.ValidString(id):
		return errors.New("is not valid UTF-8")
	case id == "." || id == "..":
		return errors.New("is a relative path element")
	case strings.ContainsAny(id, `/\`):
		return errors.New("contains a path separator")
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return errors.New("contains a control character")
	}
	return nil
}

// serveCloseThread answers POST /close_thread: 200 with an empty body
// whatever the body holds (RAP TC-2), then cancels the thread's calls and
// subscriptions.
func (s *Server) serveCloseThread(w http.ResponseWriter, r *http.Request) {
	br := s.budgeted(r.Body)
	body, _ := io.ReadAll(http.MaxBytesReader(w, io.NopCloser(br), s.opts.MaxBodyBytes))
	br.release()
	w.WriteHeader(http.StatusOK)
	req, err := DecodeCloseThread(body)
	if err != nil {
		s.log.Warn("rap: ignoring malformed close_thread", "toolset", s.name, "error", err)
		return
	}
	if err := validID(req.ThreadID); err != nil {
		s.log.Warn("rap: ignoring close_thread with an unusable thread_id", "toolset", s.name, "problem", err)
		return
	}
	s.mu.Lock()
	var cancels []context.CancelCauseFunc
	for _, a := range s.active[req.ThreadID] {
		cancels = append(cancels, a.cancel)
	}
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel(ErrThreadClosed)
	}
	s.log.Info("rap: thread closed", "toolset", s.name, "thread_id", req.ThreadID, "cancelled", len(cancels))
}

// serveCancel answers POST /cancel_tool_call: 200 with an empty body
// whatever the body holds (RAP CA-2), then cancels the call's context.
func (s *Server) serveCancel(w http.ResponseWriter, r *http.Request) {
	br := s.budgeted(r.Body)
	body, _ := io.ReadAll(http.MaxBytesReader(w, io.NopCloser(br), s.opts.MaxBodyBytes))
	br.release()
	w.WriteHeader(http.StatusOK)
	req, err := DecodeCancelToolCall(body)
	if err != nil {
		s.log.Warn("rap: ignoring malformed cancel_tool_call", "toolset", s.name, "error", err)
		return
	}
	if err := validID(req.ThreadID); err != nil {
		s.log.Warn("rap: ignoring cancel_tool_call with an unusable thread_id", "toolset", s.name, "problem", err)
		return
	}
	if err := validID(req.ToolCallID); err != nil {
		s.log.Warn("rap: ignoring cancel_tool_call with an unusable tool_call_id", "toolset", s.name, "problem", err)
		return
	}
	s.mu.Lock()
	a, found := s.active[req.ThreadID][req.ToolCallID]
	s.mu.Unlock()
	if found {
		a.cancel(ErrCallCancelled)
	}
	s.log.Info("rap: tool call cancelled", "toolset", s.name, "thread_id", req.ThreadID, "tool_call_id", req.ToolCallID, "found", found)
}

// serveMigrate answers POST /migrate (RAP MI-1): 200 only once the
// Migrator returned nil, 500 with its message otherwise.
func (s *Server) serveMigrate(w http.ResponseWriter, r *http.Request) {
	if s.opts.Migrator == nil {
		http.Error(w, "this toolset does not migrate sessions (its manifest says needsMigration: false)", http.StatusNotFound)
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	req, err := DecodeMigrate(body)
	if err != nil {
		http.Error(w, "invalid migrate request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := checkURL(req.DestinationURL); err != nil {
		http.Error(w, "invalid migrate request: destination_url: "+err.Error(), http.StatusBadRequest)
		return
	}
	// A migration may take longer than the write timeout that bounds
	// every other answer; the runtime waits for it (RAP MI-1).
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	start := time.Now()
	if err := s.opts.Migrator(r.Context(), req); err != nil {
		s.log.Error("rap: migration failed", "toolset", s.name, "session_id", req.SessionID, "error", err)
		http.Error(w, "migration of session "+req.SessionID+" failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	s.log.Info("rap: session migrated", "toolset", s.name, "session_id", req.SessionID, "took", time.Since(start))
	w.WriteHeader(http.StatusOK)
}

// isLoopback reports whether host (without port) is a loopback name or
// address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
