package rap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Limits and defaults of callback delivery.
const (
	// MaxCallbackBytes is the largest callback body, shared by both ends:
	// a Sender refuses to send a larger one and gorap's runtime answers 413
	// to it. A tool result with larger images should link to them instead.
	MaxCallbackBytes = 4 << 20
	// MaxCallbackURLBytes is the longest callback URL a Sender accepts.
	MaxCallbackURLBytes = 8 << 10
	// DefaultAttemptTimeout bounds one POST of a callback when
	// SenderOptions.AttemptTimeout is zero. It is short so that a runtime
	// that accepts connections but never answers costs its own queue
	// little time between retries.
	DefaultAttemptTimeout = 10 * time.Second
	// DefaultRetryInitial is RetryPolicy.Initial when it is zero.
	DefaultRetryInitial = 250 * time.Millisecond
	// DefaultRetryMax is RetryPolicy.Max when it is zero.
	DefaultRetryMax = time.Minute
	// DefaultMaxRetryAge is RetryPolicy.GiveUpAfter when it is zero: how
	// long a callback is retried before it is dead-lettered.
	DefaultMaxRetryAge = 24 * time.Hour
	// MaxInFlight is how many callbacks a Sender's outbox loop POSTs at
	// once to one destination (Destination of the callback URL), over as
	// many kept-alive connections. Every destination has its own
	// MaxInFlight, so a runtime that never answers slows only the
	// callbacks addressed to it. Calls share them: one call's messages go
	// out one at a time, in order, and up to MaxInFlight calls' messages
	// at once, whether the calls name one callback URL or one each.
	MaxInFlight = 16
)

// IdempotencyKeyHeader carries a callback's delivery key. Every retry of one
// message carries the same key, so a receiver may deduplicate by it as well
// as by the message's own ids (RAP RE-6).
const IdempotencyKeyHeader = "Idempotency-Key"

// callbackErrorBodyLimit is how much of a refused callback's response body is kept
// in a DeliveryError.
const callbackErrorBodyLimit = 1 << 10

// Outbox loop tuning.
const (
	outboxPoll        = time.Second // re-read the outbox this often even when not woken
	outboxFlushPoll   = 50 * time.Millisecond
	outboxMarkTimeout = 10 * time.Second // for Delivered/Attempted after a response
	outboxRetryWait   = time.Second      // pause after an outbox read error
)

// RetryPolicy sets the exponential backoff between delivery attempts of one
// callback. The n-th retry waits a random duration between zero and
// min(Max, Initial·2ⁿ⁻¹) ("full jitter"), so many senders retrying against a
// recovering runtime spread out instead of arriving together.
type RetryPolicy struct {
	// Initial is the backoff cap of the first retry; zero means 250 ms.
	Initial time.Duration
	// Max caps every backoff; zero means one minute.
	Max time.Duration
	// GiveUpAfter is the maximum retry age: a message still not
	// delivered that long after it was first sent (direct mode) or
	// enqueued (outbox mode) is given up after its next failed attempt
	// (every message is attempted at least once, however old). In outbox mode it is then
	// dead-lettered (see DeadLetterStore): kept, logged once with its
	// redacted URL, and listable with Sender.DeadLetters or "rap outbox".
	// Zero means DefaultMaxRetryAge (24 hours); a message is never
	// retried for ever.
	GiveUpAfter time.Duration
}

// SenderOptions configures a Sender. The zero value is usable: it delivers
// directly, with the default retry policy.
type SenderOptions struct {
	// Client sends the POSTs; nil means a client on a clone of
	// http.DefaultTransport that keeps MaxInFlight idle connections per
	// host and follows only the redirects that keep the POST (307, 308).
	Client *http.Client
	// Header holds extra headers put on callbacks, such as an
	// Authorization header the runtime expects (RAP TR-7). They are sent
	// only to callback URLs of HeaderOrigins: a caller names its own
	// callback_url, and the runtime's credentials must not reach a URL an
	// attacker chose. Content-Type is always application/json and cannot
	// be overridden.
	Header http.Header
	// HeaderOrigins lists the origins that receive Header, each
	// "scheme://host:port" (the port may be left out for 80 and 443), such
	// as "https://runtime.example.com". Callbacks to other origins are
	// still delivered, without Header. When Header is set and
	// HeaderOrigins is empty, Send fails with an error naming this option.
	// A redirect to another origin drops every configured header.
	HeaderOrigins []string
	// Outbox, when set, makes Send durable: it stores the message and
	// returns, and Run delivers it, surviving restarts (RAP IN-4).
	Outbox Outbox
	// Retry is the backoff policy for retryable failures.
	Retry RetryPolicy
	// AttemptTimeout bounds one POST; zero means DefaultAttemptTimeout
	// (10 s).
	AttemptTimeout time.Duration
	// PerDestination bounds the POSTs Run makes at once to one
	// destination (see Destination); zero means MaxInFlight.
	PerDestination int
	// Logger receives one record per delivery outcome; nil means
	// slog.Default(). Records carry the redacted URL, never the body.
	Logger *slog.Logger
}

// DeliveryError reports a callback the receiver did not accept.
type DeliveryError struct {
	// URL is the callback URL without its query string, fragment and
	// userinfo, since callback URLs carry tokens (RAP TR-7).
	URL string
	// Status is the HTTP status of the last attempt, or 0 when no response
	// arrived (connection refused, timeout).
	Status int
	// Body is the start of the response body of the last attempt.
	Body string
	// Permanent is true when retrying cannot help: the receiver answered
	// 4xx (RAP TR-6) or another non-retryable status.
	Permanent bool
	// Err is the transport error of the last attempt when Status is 0.
	Err error
}

// Error describes the failure without exposing the callback URL's secrets.
func (e *DeliveryError) Error() string {
	switch {
	case e.Status == 0 && e.Err != nil:
		return fmt.Sprintf("rap: callback to %s failed: %v", e.URL, e.Err)
	case e.Permanent:
		return fmt.Sprintf("rap: callback to %s refused with HTTP %d (not retried): %q", e.URL, e.Status, e.Body)
	default:
		return fmt.Sprintf("rap: callback to %s failed with HTTP %d: %q", e.URL, e.Status, e.Body)
	}
}

// Unwrap returns the transport error, if any.
func (e *DeliveryError) Unwrap() error { return e.Err }

// Sender POSTs callback messages (tool results, subscription events, and
// the rest) to callback URLs, retrying transient failures with exponential
// backoff (RAP TR-6).
//
// Without an Outbox, Send delivers at once and reports the outcome. With an
// Outbox, Send only stores the message durably and Run delivers it, so that
// nothing a tool has produced is lost when the runtime is down or the tool
// server restarts (RAP IN-4). Run keeps each call's messages in the order
// they were sent, so a subscription's events never overtake one another or
// its final event, and delivers different calls' messages concurrently.
//
// Delivery is at least once. A message is marked delivered only after the
// receiver's 2xx, so a crash between the two resends it; runtimes
// deduplicate such redeliveries (RAP RE-6).
//
// A Sender is safe for concurrent use.
type Sender struct {
	client         *http.Client
	header         http.Header
	origins        map[string]bool // normalised HeaderOrigins
	configErr      error           // a problem of the options, returned by Send
	outbox         Outbox
	retry          RetryPolicy
	attemptTimeout time.Duration
	perDest        int // POSTs at once per destination
	log            *slog.Logger

	wake    chan struct{} // buffered(1): the outbox has news
	running atomic.Bool   // Run is active

	// onGone, when set, is told of a subscription event answered 410
	// Gone: the runtime no longer knows the subscription (RAP SU-4).
	onGone func(groupID, toolCallID string)
	// metrics are its Server's (metrics.go), nil without; queued counts
	// the messages Run holds and has not delivered.
	metrics *serverMetrics
	queued  atomic.Int64

	warnMu     sync.Mutex
	warnedDest map[string]bool // destinations warned about withheld headers

	mu       sync.Mutex
	inflight int           // direct sends under way
	progress chan struct{} // closed and replaced whenever something finishes that a Flush waits for
	watched  bool          // a Flush holds progress: the next signal must close it
}

// NewSender returns a Sender configured by opts.
func NewSender(opts SenderOptions) *Sender {
	s := &Sender{
		client:         opts.Client,
		header:         opts.Header.Clone(),
		outbox:         opts.Outbox,
		retry:          opts.Retry,
		attemptTimeout: opts.AttemptTimeout,
		perDest:        opts.PerDestination,
		log:            opts.Logger,
		wake:           make(chan struct{}, 1),
		progress:       make(chan struct{}),
	}
	if s.client == nil {
		s.client = defaultCallbackClient()
	}
	if s.retry.Initial <= 0 {
		s.retry.Initial = DefaultRetryInitial
	}
	if s.retry.Max <= 0 {
		s.retry.Max = DefaultRetryMax
	}
	if s.retry.Max < s.retry.Initial {
		s.retry.Max = s.retry.Initial
	}
	if s.retry.GiveUpAfter <= 0 {
		s.retry.GiveUpAfter = DefaultMaxRetryAge
	}
	s.origins, s.configErr = parseOrigins(opts.HeaderOrigins, len(s.header) > 0)
	if s.perDest <= 0 {
		s.perDest = MaxInFlight
	}
	if s.attemptTimeout <= 0 {
		s.attemptTimeout = DefaultAttemptTimeout
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// defaultCallbackClient is the client of a Sender without one: the default
// transport, but keeping enough idle connections for MaxInFlight concurrent
// callbacks to one runtime, which is the usual case (the default keeps two).
func defaultCallbackClient() *http.Client { return callbackClient(MaxInFlight) }

// callbackClient returns a client on a clone of the default transport that
// keeps up to idle connections per runtime host, so that concurrent
// callbacks reuse connections instead of dialling anew.
func callbackClient(idle int) *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultClient
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = idle
	if t.MaxIdleConns < idle {
		t.MaxIdleConns = idle
	}
	return &http.Client{Transport: t, CheckRedirect: keepPOST}
}

// keepPOST follows only the redirects that repeat the POST with its body
// (307 and 308). Following a 301, 302 or 303 would turn the callback into
// a bodiless GET that can answer 200 without the message ever arriving;
// such answers are returned as they are, and are not retried.
func keepPOST(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.Response != nil && (req.Response.StatusCode == http.StatusTemporaryRedirect || req.Response.StatusCode == http.StatusPermanentRedirect) {
		if origin(req.URL) != origin(via[0].URL) {
			// Credentials configured for the runtime's origin must not
			// follow a redirect elsewhere.
			stripConfiguredHeaders(req.Header)
		}
		return nil
	}
	return http.ErrUseLastResponse
}

// Send delivers msg to callbackURL.
//
// With an Outbox, Send returns nil as soon as the message is durable; Run
// delivers it. Without one, Send POSTs now and retries connection errors,
// timeouts and 5xx answers until the receiver answers 2xx (nil), answers
// 4xx (a *DeliveryError with Permanent set, never retried: RAP TR-6), the
// retry policy gives up (a *DeliveryError), or ctx ends (an error wrapping
// ctx.Err() and the last *DeliveryError).
func (s *Sender) Send(ctx context.Context, callbackURL string, msg Callback) error {
	if s.configErr != nil {
		return s.configErr
	}
	if err := checkCallbackURL(callbackURL); err != nil {
		return err
	}
	return s.send(ctx, callbackURL, msg)
}

// SendFor is Send for a message about the invocation invocationID that
// does not name it (a *ViewUpdate): with an Outbox it is delivered in that
// call's order, after the messages the call sent before it and before its
// result, as the call's own messages are (OutboxMessage.ForID). Call's
// UpdateView does this for a handler.
func (s *Sender) SendFor(ctx context.Context, callbackURL, invocationID string, msg Callback) error {
	if s.configErr != nil {
		return s.configErr
	}
	if err := checkCallbackURL(callbackURL); err != nil {
		return err
	}
	return s.sendEnding(ctx, callbackURL, msg, "", "", invocationID)
}

// send is Send for a callback URL that already passed checkCallbackURL
// (or the server's equivalent check of an invocation's callback_url).
func (s *Sender) send(ctx context.Context, callbackURL string, msg Callback) error {
	return s.sendEnding(ctx, callbackURL, msg, "", "", "")
}

// sendEnding is send for a message that answers the journaled call
// (endsGroup, endsID): the outbox forgets the call as it stores the
// message (OutboxMessage.EndsGroupID). forID is OutboxMessage.ForID.
func (s *Sender) sendEnding(ctx context.Context, callbackURL string, msg Callback, endsGroup, endsID, forID string) error {
	if msg == nil {
		return errors.New("rap: Send: msg is nil; pass a *ToolResult, *SubscriptionEvent, *OAuth, *UserChoice or *ViewUpdate")
	}
	body, err := encodeCallback(msg)
	if err != nil {
		return fmt.Errorf("rap: Send: encoding %s message: %w", msg.MessageType(), err)
	}
	if len(body) > MaxCallbackBytes {
		r, ok := msg.(*ToolResult)
		if !ok || r == nil {
			return fmt.Errorf("rap: Send: the %s is %d bytes, over the %d-byte limit of a callback (rap.MaxCallbackBytes), and was not sent; send less, and link large data (a URL or file path) instead of inlining it", msg.MessageType(), len(body), MaxCallbackBytes)
		}
		// A call must end in a result (RAP IN-4): send one that says
		// why the real one could not be sent.
		s.log.Error("rap: tool result over the callback size limit; sending an error result instead", "url", redactedURL(callbackURL),
			"group_id", r.GroupID, "id", r.ID, "bytes", len(body), "limit", MaxCallbackBytes)
		small := tooLargeResult(len(body), 0)
		small.GroupID, small.ID, small.CallID = r.GroupID, r.ID, r.CallID
		if body, err = small.MarshalJSON(); err != nil {
			return fmt.Errorf("rap: Send: encoding the error result for an oversized tool result: %w", err)
		}
	}
	key := uuid.NewString()
	if s.outbox == nil {
		return s.sendNow(ctx, callbackURL, key, body)
	}
	tc := traceFrom(ctx)
	m := OutboxMessage{Key: key, URL: callbackURL, Body: body, Created: time.Now(), EndsGroupID: endsGroup, EndsID: endsID,
		TraceParent: tc.parent, TraceState: tc.state, ForID: forID}
	if err := s.outbox.Enqueue(ctx, m); err != nil {
		return fmt.Errorf("rap: Send: storing %s message for %s in the outbox: %w", msg.MessageType(), RedactURL(callbackURL), err)
	}
	s.notify()
	return nil
}

// encodeCallback is json.Marshal(msg). A tool result, the message of every
// call, is encoded by its own MarshalJSON directly: that already returns
// compact JSON with HTML characters escaped, which json.Marshal would only
// copy after checking it again.
func encodeCallback(msg Callback) ([]byte, error) {
	if r, ok := msg.(*ToolResult); ok && r != nil {
		return r.MarshalJSON()
	}
	return json.Marshal(msg)
}

// checkCallbackURL rejects URLs that cannot be POSTed to. The URL is
// otherwise opaque (RAP TR-5).
func checkCallbackURL(raw string) error {
	if len(raw) > MaxCallbackURLBytes {
		return fmt.Errorf("rap: callback URL is %d bytes, over the %d-byte limit", len(raw), MaxCallbackURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("rap: callback URL %s does not parse; pass the invocation's callback_url unchanged", RedactURL(raw))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("rap: callback URL %s is not an absolute http(s) URL; pass the invocation's callback_url unchanged", RedactURL(raw))
	}
	return nil
}

// redactedSegmentLen is the length from which a path segment is taken for
// a token and hidden by RedactURL.
const redactedSegmentLen = 20

// RedactURL returns raw without userinfo, query string and fragment, and
// with every path segment of 20 characters or more replaced by "redacted":
// these are the parts that carry tokens (gorap's runtime puts its callback
// token in the path), so the result can be logged. Unparseable input yields
// a placeholder rather than the input.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable URL>"
	}
	u.User = nil
	u.RawQuery = ""
	u.ForceQuery = false
	u.Fragment = ""
	u.RawFragment = ""
	if segs := strings.Split(u.EscapedPath(), "/"); len(segs) > 1 {
		changed := false
		for i, seg := range segs {
			if len(seg) >= redactedSegmentLen {
				segs[i], changed = "redacted", true
			}
		}
		if changed {
			p := strings.Join(segs, "/")
			u.Path, _ = url.PathUnescape(p)
			u.RawPath = p
		}
	}
	return u.String()
}

// redactedURL is a callback URL that logs and prints as RedactURL does,
// computed only when a record or error actually needs it.
type redactedURL string

func (u redactedURL) String() string { return RedactURL(string(u)) }

// LogValue implements slog.LogValuer.
func (u redactedURL) LogValue() slog.Value { return slog.StringValue(u.String()) }

// sendNow is Send without an outbox.
func (s *Sender) sendNow(ctx context.Context, callbackURL, key string, body []byte) error {
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.signalLocked()
		s.mu.Unlock()
	}()

	start := time.Now()
	var last, answered *DeliveryError // answered: the last attempt the runtime answered
	replaced := false
	for attempt := 1; ; attempt++ {
		r := s.attempt(ctx, callbackURL, key, body, attempt)
		if r.ok() {
			return nil
		}
		last = r.err
		if last.Status != 0 {
			answered = last
		}
		if last.Permanent && last.Status == http.StatusRequestEntityTooLarge && !replaced {
			if small, ok := tooLargeReplacement(body); ok {
				s.log.Error("rap: the runtime refused a tool result as too large (HTTP 413); sending an error result instead", "url", last.URL, "key", key, "bytes", len(body))
				key, body, replaced = key+"-too-large", small, true
				continue
			}
		}
		if last.Permanent {
			return last
		}
		if err := ctx.Err(); err != nil {
			return notDelivered(attempt, err, last, answered)
		}
		if time.Since(start) >= s.retry.GiveUpAfter {
			s.log.Error("rap: giving up on callback", "url", last.URL, "key", key, "attempts", attempt, "after", s.retry.GiveUpAfter)
			return fmt.Errorf("rap: callback to %s: gave up after %d attempts in %v: %w", last.URL, attempt, s.retry.GiveUpAfter, last)
		}
		if err := sleepCtx(ctx, s.backoff(attempt, r.retryAfter)); err != nil {
			return notDelivered(attempt, err, last, answered)
		}
	}
}

// sendOutcome is the outcome of one POST.
type sendOutcome struct {
	err        *DeliveryError // nil on 2xx
	retryAfter time.Duration  // from a 503's Retry-After header
}

func (r sendOutcome) ok() bool { return r.err == nil }

// attempt POSTs body once and logs the outcome.
func (s *Sender) attempt(ctx context.Context, callbackURL, key string, body []byte, n int) sendOutcome {
	// Redacting parses the URL: do it only for a log record that is
	// written or an error that is returned, not on every delivery.
	redacted := redactedURL(callbackURL)
	actx, cancel := context.WithTimeout(ctx, s.attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, callbackURL, bytes.NewReader(body))
	if err != nil {
		// checkCallbackURL ran before, so this is not expected; treat as
		// permanent since the same URL fails the same way again.
		de := &DeliveryError{URL: redacted.String(), Permanent: true, Err: stripURLError(err)}
		s.log.Error("rap: callback request could not be built", "url", redacted, "key", key, "error", de.Err)
		return sendOutcome{err: de}
	}
	if len(s.header) > 0 {
		if s.headerAllowed(req.URL) {
			for k, vs := range s.header {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
		} else {
			s.warnWithheld(req.URL)
		}
	}
	req.Header["Content-Type"] = jsonContentType // RAP TR-1; set, not added to
	req.Header[IdempotencyKeyHeader] = []string{key}
	traceFrom(ctx).set(req.Header) // the call's trace context (tracing.go)

	t0 := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		de := &DeliveryError{URL: redacted.String(), Err: stripURLError(err)}
		if ctx.Err() == nil {
			s.log.Warn("rap: callback attempt failed; will retry", "url", redacted, "key", key, "attempt", n, "error", de.Err, "elapsed", time.Since(t0))
		}
		return sendOutcome{err: de}
	}
	defer resp.Body.Close()
	var snippet []byte
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		snippet, _ = io.ReadAll(io.LimitReader(resp.Body, callbackErrorBodyLimit))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused

	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		level := slog.LevelDebug // the common case stays out of busy logs
		if n > 1 {
			level = slog.LevelInfo
		}
		s.log.Log(ctx, level, "rap: callback delivered", "url", redacted, "key", key, "attempt", n, "status", resp.StatusCode, "elapsed", time.Since(t0))
		return sendOutcome{}
	case resp.StatusCode >= 500:
		s.log.Warn("rap: callback attempt failed; will retry", "url", redacted, "key", key, "attempt", n, "status", resp.StatusCode, "elapsed", time.Since(t0))
		return sendOutcome{
			err:        &DeliveryError{URL: redacted.String(), Status: resp.StatusCode, Body: string(snippet)},
			retryAfter: parseRetryAfter(resp.Header.Get("Retry-After")),
		}
	default:
		// 4xx: the receiver rejected the message for a reason a retry
		// does not change, such as an unknown group_id or an expired
		// callback URL (RAP TR-6). 1xx and unfollowed 3xx answers are
		// treated the same way: the message was not accepted, and
		// repeating it will not change that.
		s.log.Error("rap: callback refused; not retrying", "url", redacted, "key", key, "attempt", n, "status", resp.StatusCode, "elapsed", time.Since(t0))
		return sendOutcome{err: &DeliveryError{URL: redacted.String(), Status: resp.StatusCode, Body: string(snippet), Permanent: true}}
	}
}

// jsonContentType is the Content-Type of every callback, shared by all
// requests: net/http only reads header values.
var jsonContentType = []string{"application/json"}

// stripURLError removes the *url.Error wrapper, whose message repeats the
// full URL, token included.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("%s: timeout: %w", ue.Op, ue.Err)
		}
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// parseRetryAfter reads a Retry-After header given in seconds.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	secs, err := strconv.Atoi(v)
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(secs) * time.Second
}

// backoff returns the wait before retry number n (n ≥ 1): full jitter over
// an exponentially growing cap, at least the receiver's Retry-After when it
// sent one, never more than Max.
func (s *Sender) backoff(n int, retryAfter time.Duration) time.Duration {
	ceiling := s.retry.Initial
	for i := 1; i < n && ceiling < s.retry.Max; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, s.retry.Max)
	d := time.Duration(rand.Int64N(int64(ceiling) + 1))
	if retryAfter > d {
		d = min(retryAfter, s.retry.Max)
	}
	return d
}

// notDelivered is Send's error when ctx ended before a delivery: it wraps
// ctx's error and the last answer the runtime gave (such as a 503), which
// says more than an attempt the deadline cut short.
func notDelivered(attempts int, ctxErr error, last, answered *DeliveryError) error {
	if answered != nil && answered != last {
		return fmt.Errorf("rap: callback to %s not delivered after %d attempts: %w (last answer: %w; the last attempt was cut short: %v)", last.URL, attempts, ctxErr, answered, last)
	}
	return fmt.Errorf("rap: callback to %s not delivered after %d attempts: %w (last attempt: %w)", last.URL, attempts, ctxErr, last)
}

// sleep waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// notify wakes the outbox loop without blocking.
func (s *Sender) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// signalLocked wakes every Flush waiting for progress. s.mu must be held.
// When no Flush took the channel since the last signal, there is nobody to
// wake, and the channel is kept.
func (s *Sender) signalLocked() {
	if !s.watched {
		return
	}
	close(s.progress)
	s.progress = make(chan struct{})
	s.watched = false
}

func (s *Sender) signal() {
	s.mu.Lock()
	s.signalLocked()
	s.mu.Unlock()
}

// Flush waits until nothing is left to deliver: with an Outbox, until the
// outbox is empty (dead-lettered messages count as done); without
// one, until every Send under way has returned. It returns ctx.Err() if
// ctx ends first. With an Outbox, Flush only waits: Run must be running,
// in this process or another one sharing the outbox, for it to return.
func (s *Sender) Flush(ctx context.Context) error {
	for {
		s.mu.Lock()
		progress := s.progress
		s.watched = true
		idle := s.inflight == 0
		s.mu.Unlock()
		if s.outbox != nil && idle {
			p, err := s.outbox.Pending(ctx, 1)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("rap: Flush: reading the outbox: %w", err)
			}
			idle = len(p) == 0
		}
		if idle {
			return nil
		}
		var poll <-chan time.Time
		var t *time.Timer
		if s.outbox != nil {
			// Another process may deliver from the same outbox; its
			// progress does not signal us.
			t = time.NewTimer(outboxFlushPoll)
			poll = t.C
		}
		select {
		case <-progress:
		case <-poll:
		case <-ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
