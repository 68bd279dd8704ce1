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
	// SenderOptions.AttemptTimeout is zero.
	DefaultAttemptTimeout = 30 * time.Second
	// DefaultRetryInitial is RetryPolicy.Initial when it is zero.
	DefaultRetryInitial = 250 * time.Millisecond
	// DefaultRetryMax is RetryPolicy.Max when it is zero.
	DefaultRetryMax = time.Minute
	// MaxInFlight is how many callbacks a Sender's outbox loop POSTs at once.
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
	outboxBatch       = 256         // new messages read from the outbox per refill
	outboxWindow      = 4096        // messages the loop holds in memory at most
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
	// GiveUpAfter, when positive, abandons a message that is still not
	// delivered that long after it was first sent (direct mode) or
	// enqueued (outbox mode). Zero means never give up, which is what RAP
	// asks for: every invocation must end in a callback (RAP IN-4).
	GiveUpAfter time.Duration
}

// SenderOptions configures a Sender. The zero value is usable: it delivers
// directly, with the default retry policy.
type SenderOptions struct {
	// Client sends the POSTs; nil means a client on a clone of
	// http.DefaultTransport that keeps MaxInFlight idle connections per
	// host and follows only the redirects that keep the POST (307, 308).
	Client *http.Client
	// Header holds extra headers put on every callback, such as an
	// Authorization header the runtime expects (RAP TR-7). Content-Type
	// is always application/json and cannot be overridden.
	Header http.Header
	// Outbox, when set, makes Send durable: it stores the message and
	// returns, and Run delivers it, surviving restarts (RAP IN-4).
	Outbox Outbox
	// Retry is the backoff policy for retryable failures.
	Retry RetryPolicy
	// AttemptTimeout bounds one POST; zero means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
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
// server restarts (RAP IN-4). Run keeps the messages for one callback URL in
// the order they were sent, so a subscription's events never overtake one
// another or its final event.
//
// Delivery is at least once. A message is marked delivered only after the
// receiver's 2xx, so a crash between the two resends it; runtimes
// deduplicate such redeliveries (RAP RE-6).
//
// A Sender is safe for concurrent use.
type Sender struct {
	client         *http.Client
	header         http.Header
	outbox         Outbox
	retry          RetryPolicy
	attemptTimeout time.Duration
	log            *slog.Logger

	wake    chan struct{} // buffered(1): the outbox has news
	running atomic.Bool   // Run is active

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
	if err := checkCallbackURL(callbackURL); err != nil {
		return err
	}
	return s.send(ctx, callbackURL, msg)
}

// send is Send for a callback URL that already passed checkCallbackURL
// (or the server's equivalent check of an invocation's callback_url).
func (s *Sender) send(ctx context.Context, callbackURL string, msg Callback) error {
	return s.sendEnding(ctx, callbackURL, msg, "", "")
}

// sendEnding is send for a message that answers the journaled call
// (endsGroup, endsID): the outbox forgets the call as it stores the
// message (OutboxMessage.EndsGroupID).
func (s *Sender) sendEnding(ctx context.Context, callbackURL string, msg Callback, endsGroup, endsID string) error {
	if msg == nil {
		return errors.New("rap: Send: msg is nil; pass a *ToolResult, *SubscriptionEvent, *OAuth, *UserChoice or *ViewUpdate")
	}
	body, err := encodeCallback(msg)
	if err != nil {
		return fmt.Errorf("rap: Send: encoding %s message: %w", msg.MessageType(), err)
	}
	if len(body) > MaxCallbackBytes {
		return fmt.Errorf("rap: Send: %s message is %d bytes, over the %d-byte limit; send large data by reference", msg.MessageType(), len(body), MaxCallbackBytes)
	}
	key := uuid.NewString()
	if s.outbox == nil {
		return s.sendNow(ctx, callbackURL, key, body)
	}
	m := OutboxMessage{Key: key, URL: callbackURL, Body: body, Created: time.Now(), EndsGroupID: endsGroup, EndsID: endsID}
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
	var last *DeliveryError
	for attempt := 1; ; attempt++ {
		r := s.attempt(ctx, callbackURL, key, body, attempt)
		if r.ok() {
			return nil
		}
		last = r.err
		if last.Permanent {
			return last
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("rap: callback to %s not delivered after %d attempts: %w (last attempt: %w)", last.URL, attempt, err, last)
		}
		if s.retry.GiveUpAfter > 0 && time.Since(start) >= s.retry.GiveUpAfter {
			s.log.Error("rap: giving up on callback", "url", last.URL, "key", key, "attempts", attempt, "after", s.retry.GiveUpAfter)
			return fmt.Errorf("rap: callback to %s: gave up after %d attempts in %v: %w", last.URL, attempt, s.retry.GiveUpAfter, last)
		}
		if err := sleepCtx(ctx, s.backoff(attempt, r.retryAfter)); err != nil {
			return fmt.Errorf("rap: callback to %s not delivered after %d attempts: %w (last attempt: %w)", last.URL, attempt, err, last)
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
	for k, vs := range s.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header["Content-Type"] = jsonContentType // RAP TR-1; set, not added to
	req.Header[IdempotencyKeyHeader] = []string{key}

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
// outbox is empty (messages dropped after a 4xx count as done); without
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

// urlLane is the queue of messages for one callback URL. One goroutine drains
// a lane at a time, so its messages go out in enqueue order.
type urlLane struct {
	url    string
	msgs   []OutboxMessage
	active bool
}

// outboxLoop is the state of one Run.
type outboxLoop struct {
	s     *Sender
	mu    sync.Mutex // guards lanes and known; held across outbox reads
	lanes map[string]*urlLane
	known map[string]bool // keys held in lanes, including the one in flight
	// lastSeq is the largest Seq read from a SequencedOutbox.
	lastSeq int64
	sem     chan struct{} // bounds concurrent POSTs
	wg      sync.WaitGroup
	done    chan struct{} // a lane finished a message: room to refill
}

// Run delivers the outbox's messages until ctx ends, then returns
// ctx.Err() once every delivery goroutine has stopped. It first delivers
// whatever a previous process left pending, then every message Send
// enqueues.
//
// Connection errors, timeouts and 5xx answers are retried per message with
// full-jitter exponential backoff (RAP TR-6); the message stays in the
// outbox meanwhile and later messages for the same URL wait behind it. A
// 4xx answer is logged and the message dropped, never retried (RAP TR-6).
// Up to MaxInFlight callbacks to different URLs are POSTed at once. Run
// holds at most a few thousand messages in memory; the rest wait in the
// outbox.
//
// Without an Outbox, Run has nothing to do and just waits for ctx. Only one
// Run may be active per Sender; a second returns an error at once. Run one
// delivery loop per outbox: two processes running Run on the same file
// would both deliver its messages, duplicating them (harmless to a runtime
// that deduplicates, RAP RE-6, but wasteful). Other processes may Send
// into it freely; Run picks their messages up within a second.
func (s *Sender) Run(ctx context.Context) error {
	if s.outbox == nil {
		<-ctx.Done()
		return ctx.Err()
	}
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("rap: Sender.Run is already running; call it once per Sender")
	}
	defer s.running.Store(false)

	l := &outboxLoop{
		s:     s,
		lanes: make(map[string]*urlLane),
		known: make(map[string]bool),
		sem:   make(chan struct{}, MaxInFlight),
		done:  make(chan struct{}, 1),
	}
	defer l.wg.Wait()

	poll := time.NewTicker(outboxPoll)
	defer poll.Stop()
	for {
		if err := l.refill(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.log.Error("rap: reading the outbox failed; retrying", "error", err, "retry_in", outboxRetryWait)
			if sleepCtx(ctx, outboxRetryWait) != nil {
				return ctx.Err()
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.wake:
		case <-l.done:
		case <-poll.C:
		}
	}
}

// SequencedMessage is an outbox message with its position in enqueue order.
type SequencedMessage struct {
	OutboxMessage
	// Seq grows with every enqueue and is never reused: a message
	// enqueued later has a larger Seq.
	Seq int64
}

// SequencedOutbox is an Outbox that can list the messages enqueued after a
// position. Sender.Run uses it when the Outbox provides it, so that it
// reads each message once instead of re-reading the ones it already holds;
// this keeps a large backlog cheap to drain. rap/durable implements it.
type SequencedOutbox interface {
	Outbox
	// PendingAfter returns up to limit undelivered messages whose Seq is
	// greater than after, in Seq order. A message must become visible
	// only after every message with a smaller Seq has.
	PendingAfter(ctx context.Context, after int64, limit int) ([]SequencedMessage, error)
}

// refill reads pending messages the loop does not hold yet, appends them
// to their lanes in enqueue order, and starts a goroutine for every idle
// lane with work.
//
// The lock is held across the read so that a lane cannot finish a message
// (delete it from the outbox, then forget its key) between the read and
// the merge, which would otherwise bring the just-delivered message back.
func (l *outboxLoop) refill(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if so, ok := l.s.outbox.(SequencedOutbox); ok {
		for room := outboxWindow - len(l.known); room > 0; room = outboxWindow - len(l.known) {
			ask := min(room, outboxBatch)
			msgs, err := so.PendingAfter(ctx, l.lastSeq, ask)
			if err != nil {
				return err
			}
			for _, m := range msgs {
				l.lastSeq = max(l.lastSeq, m.Seq)
				l.hold(m.OutboxMessage)
			}
			if len(msgs) < ask {
				break
			}
		}
	} else if len(l.known) < outboxWindow {
		msgs, err := l.s.outbox.Pending(ctx, len(l.known)+outboxBatch)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if len(l.known) >= outboxWindow {
				break
			}
			l.hold(m)
		}
	}
	for _, ln := range l.lanes {
		if !ln.active && len(ln.msgs) > 0 {
			ln.active = true
			l.wg.Add(1)
			go l.drain(ctx, ln)
		}
	}
	return nil
}

// hold appends m to its lane unless the loop holds it already. l.mu must
// be held.
func (l *outboxLoop) hold(m OutboxMessage) {
	if l.known[m.Key] {
		return
	}
	l.known[m.Key] = true
	ln := l.lanes[m.URL]
	if ln == nil {
		ln = &urlLane{url: m.URL}
		l.lanes[m.URL] = ln
	}
	ln.msgs = append(ln.msgs, m)
}

// drain delivers a lane's messages in order until the lane is empty or ctx
// ends.
func (l *outboxLoop) drain(ctx context.Context, ln *urlLane) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		if len(ln.msgs) == 0 || ctx.Err() != nil {
			ln.active = false
			if len(ln.msgs) == 0 {
				delete(l.lanes, ln.url)
			}
			l.mu.Unlock()
			return
		}
		m := ln.msgs[0]
		l.mu.Unlock()

		if !l.deliver(ctx, m) {
			// ctx ended: the message stays in the outbox for the next Run.
			l.mu.Lock()
			ln.active = false
			l.mu.Unlock()
			return
		}
		l.mu.Lock()
		ln.msgs = ln.msgs[1:]
		delete(l.known, m.Key)
		l.mu.Unlock()
		l.s.signal()
		select {
		case l.done <- struct{}{}:
		default:
		}
	}
}

// deliver POSTs m until it is delivered or dropped (true), or ctx ends
// (false).
func (l *outboxLoop) deliver(ctx context.Context, m OutboxMessage) bool {
	s := l.s
	for n := 1; ; n++ {
		if s.retry.GiveUpAfter > 0 && !m.Created.IsZero() && time.Since(m.Created) >= s.retry.GiveUpAfter {
			s.log.Error("rap: giving up on callback; dropping it", "url", RedactURL(m.URL), "key", m.Key, "attempts", m.Attempts+n-1, "age", time.Since(m.Created).Round(time.Millisecond))
			return l.finish(ctx, m)
		}
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		r := s.attempt(ctx, m.URL, m.Key, m.Body, m.Attempts+n)
		<-l.sem
		if r.ok() || r.err.Permanent {
			// A 4xx is final: the message is dropped, never retried
			// (RAP TR-6); attempt has logged it.
			return l.finish(ctx, m)
		}
		if ctx.Err() != nil {
			return false
		}
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outboxMarkTimeout)
		if err := s.outbox.Attempted(mctx, m.Key); err != nil {
			s.log.Warn("rap: recording a callback attempt in the outbox failed", "url", RedactURL(m.URL), "key", m.Key, "error", err)
		}
		cancel()
		if sleepCtx(ctx, s.backoff(n, r.retryAfter)) != nil {
			return false
		}
	}
}

// finish removes m from the outbox. It retries a failing store until ctx
// ends, since giving up would only resend a message already answered.
func (l *outboxLoop) finish(ctx context.Context, m OutboxMessage) bool {
	s := l.s
	for n := 1; ; n++ {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outboxMarkTimeout)
		err := s.outbox.Delivered(mctx, m.Key)
		cancel()
		if err == nil {
			return true
		}
		s.log.Error("rap: removing a delivered callback from the outbox failed; retrying", "url", RedactURL(m.URL), "key", m.Key, "error", err)
		if sleepCtx(ctx, s.backoff(n, 0)) != nil {
			return false
		}
	}
}
