// Package store defines the durable state of the agent runtime: the thread
// tree, each thread's history, the inbox that wakes threads, the tool calls
// waiting for results, subscriptions, views, timers and the toolset cache.
//
// The engine sees the store only through the Store interface, so that an
// embedded SQLite file (package runtime/store/sqlite) and a shared
// PostgreSQL database (package runtime/store/postgres) are
// interchangeable. Every read and write happens inside a transaction:
// Store.Update for writes, Store.View for reads. A function passed to
// Update either commits every change it made or none of them, which is
// what makes the engine crash-safe: a slice consumes its inbox batch in
// the same transaction that appends the history it produced.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/gorap/gorap/rap"
)

// ErrNotFound is returned (possibly wrapped) when a thread, call or other
// record does not exist. Test for it with errors.Is.
var ErrNotFound = errors.New("not found")

// ErrConsumed is returned (wrapped) by Inbox.Consume when an item is no
// longer queued: another slice, perhaps in another process sharing the
// store, consumed it first. The transaction must not commit; the engine
// abandons the slice's work. Test for it with errors.Is.
var ErrConsumed = errors.New("inbox item already consumed")

// ErrClosed is returned (possibly wrapped) by a store's methods called after
// its Close, and by calls that were still waiting for their turn when Close
// began: nothing of theirs was written. Test for it with errors.Is.
var ErrClosed = errors.New("store is closed")

// Store is a transactional runtime store.
type Store interface {
	// Update runs fn in a read-write transaction and commits it when fn
	// returns nil; otherwise it rolls back and returns fn's error. fn may be
	// run more than once when the backend asks for a retry (a serialization
	// failure), so it must not have side effects outside the transaction.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	// QuickView is View for a few indexed reads on the engine's hot path
	// (loading a slice's inputs). It sees the last committed state, like
	// View, but a store may run it where reads are cheapest: the SQLite
	// store runs it on its writer connection, whose page cache is warm,
	// just before a group of writes. fn must only read, and must be quick.
	QuickView(ctx context.Context, fn func(Tx) error) error
	// Close releases the store's resources.
	Close() error
}

// Tx is the set of operations available inside one transaction. It is
// composed of one small interface per kind of record.
type Tx interface {
	Threads
	Messages
	Inbox
	Calls
	Subscriptions
	Views
	Timers
	ToolsetCache
	ToolsetTrust
	Choices
	HeldEvents
	CallChecks
	CallbackKeyStore
	OAuthLinks
	ThreadEvents
	Sessions
	Moves
	Compactions
}

// ThreadStatus is the lifecycle state of a thread.
type ThreadStatus string

// Thread statuses.
const (
	ThreadActive ThreadStatus = "active"
	ThreadClosed ThreadStatus = "closed"
)

// Thread is one conversation. A root thread (ParentID empty) is a session;
// child threads form a tree under it.
type Thread struct {
	ID string `json:"id"`
	// ParentID is the parent thread's id, empty for a root thread.
	ParentID string `json:"parent_id,omitempty"`
	// RootID is the id of the session's root thread (the thread's own id for
	// a root thread). CreateThread fills it in from the parent when empty.
	RootID  string       `json:"root_id"`
	Status  ThreadStatus `json:"status"`
	Created time.Time    `json:"created"`
	// OriginCallID is the call a child thread was made for: the parent's
	// spawn_thread call, or the subscribing call whose event it handles.
	// Its reports reach the parent tied to this call (RAP BT-3).
	OriginCallID string `json:"origin_call_id,omitempty"`
	// OriginTool is the tool name of OriginCallID.
	OriginTool string `json:"origin_tool,omitempty"`
	// OriginArgs are the arguments of OriginCallID.
	OriginArgs json.RawMessage `json:"origin_args,omitempty"`
	// InheritSeq, for a child thread, is how much of its parent's history
	// it inherits: History returns the parent's messages up to this Seq
	// (with the parent's ThreadID), then the child's own, whose Seqs
	// continue from it. The inherited part is shared, not copied.
	InheritSeq int64 `json:"inherit_seq,omitempty"`
	// UserID is the end user of the session, sent as user_id in every
	// invocation of its threads (RAP IN-1); empty when unknown. It is set
	// on the root thread; CreateThread copies the parent's into a child
	// whose UserID is empty.
	UserID string `json:"user_id,omitempty"`
	// Title is the title a person gave the session, on its root thread;
	// empty when none was given (clients then derive one from
	// FirstMessage). SetThreadTitle changes it.
	Title string `json:"title,omitempty"`
	// FirstMessage is the start of the session's first user message
	// (FirstMessageOf), on its root thread; empty until there is one.
	// SetFirstMessage records it once.
	FirstMessage string `json:"first_message,omitempty"`
	// Archived says that the session is archived, on its root thread:
	// FindThreads can leave its threads out. SetThreadArchived changes it.
	Archived bool `json:"archived,omitempty"`
}

// Threads stores the thread tree.
type Threads interface {
	// CreateThread inserts t. A duplicate id is an error.
	CreateThread(t Thread) error
	// Thread returns the thread with id, or an error wrapping ErrNotFound.
	Thread(id string) (Thread, error)
	// ListThreads returns every thread, oldest first.
	ListThreads() ([]Thread, error)
	// SetThreadStatus changes a thread's status.
	SetThreadStatus(id string, s ThreadStatus) error
	// ThreadsPage returns up to limit threads that come after `after` in
	// ListThreads' order (oldest first, by Created then ID); the zero
	// cursor starts at the first thread. Backed by an index: a page costs
	// O(log n + limit).
	ThreadsPage(after ThreadCursor, limit int) ([]Thread, error)
	// ChildThreads returns up to limit child threads of parentID that come
	// after `after`, oldest first. Backed by an index.
	ChildThreads(parentID string, after ThreadCursor, limit int) ([]Thread, error)
	// UserThreadsPage is ThreadsPage for the threads of one user's
	// sessions (Thread.UserID, which children take from their parent).
	// Backed by an index.
	UserThreadsPage(userID string, after ThreadCursor, limit int) ([]Thread, error)
	// SetThreadTitle sets the thread's Title; "" removes it. A thread
	// that does not exist is an error wrapping ErrNotFound.
	SetThreadTitle(id, title string) error
	// SetFirstMessage records text as the thread's FirstMessage unless it
	// has one, and reports whether it did. A thread that does not exist
	// is an error wrapping ErrNotFound.
	SetFirstMessage(id, text string) (bool, error)
	// SetThreadArchived sets the thread's Archived flag. A thread that
	// does not exist is an error wrapping ErrNotFound.
	SetThreadArchived(id string, archived bool) error
	// FindThreads is ThreadsPage for the threads f selects, each judged
	// by its session's root thread (its title, first message and
	// Archived flag): up to limit of them after `after`, in ListThreads'
	// order. The zero ThreadFilter selects every thread. A page walks the
	// index of f's scope (every thread, a parent's children or a user's
	// threads) and skips the threads f leaves out.
	FindThreads(f ThreadFilter, after ThreadCursor, limit int) ([]Thread, error)
}

// ThreadCursor is a position in the order of threads (Created, then ID):
// the last thread of the previous page. The zero cursor is the start.
type ThreadCursor struct {
	Created time.Time
	ID      string
}

// CursorOf returns the cursor just after t.
func CursorOf(t Thread) ThreadCursor { return ThreadCursor{Created: t.Created, ID: t.ID} }

// IsZero reports whether c is the start.
func (c ThreadCursor) IsZero() bool { return c.Created.IsZero() && c.ID == "" }

// Role says who produced a history message.
type Role string

// Roles of history messages. Tool results are kept in their own messages
// (RoleTool) so that a result arriving after later user messages stays where
// it arrived; the engine arranges them for the model.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolCall is one tool call of an assistant turn.
type ToolCall struct {
	// ID is the call id (the model's, or one the runtime made unique).
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Display is the call rendered for people (display script or default).
	Display string `json:"display,omitempty"`
}

// ToolResult is the outcome of one tool call as recorded in the history.
type ToolResult struct {
	CallID string `json:"call_id"`
	// Name is the tool's name, kept so a result reads on its own.
	Name string `json:"name,omitempty"`
	Text string `json:"text,omitempty"`
	// Content, when present, is what the model receives instead of Text.
	Content   []rap.ContentItem    `json:"content,omitempty"`
	DisplayAs []rap.DisplaySegment `json:"display_as,omitempty"`
	IsError   bool                 `json:"is_error,omitempty"`
	// Subscription marks a result that confirmed a subscription (RAP SU-1).
	Subscription bool `json:"subscription,omitempty"`
}

// Message is one entry of a thread's history.
type Message struct {
	ThreadID string `json:"thread_id"`
	// Seq orders the messages of a thread, starting at 1. AppendMessages
	// assigns it.
	Seq         int64        `json:"seq"`
	Role        Role         `json:"role"`
	Text        string       `json:"text,omitempty"`
	ToolCalls   []ToolCall   `json:"tool_calls,omitempty"`
	ToolResults []ToolResult `json:"tool_results,omitempty"`
	Created     time.Time    `json:"created"`
	// Usage is the token count of the completion that produced an
	// assistant message, as its provider reported it; nil for other
	// messages and for a provider that reports none.
	Usage *Usage `json:"usage,omitempty"`
}

// Usage counts one completion's tokens. InputTokens is every input token;
// CachedInputTokens of them were read from the provider's prompt cache and
// CacheWriteInputTokens were written to it.
type Usage struct {
	InputTokens           int64 `json:"input_tokens"`
	CachedInputTokens     int64 `json:"cached_input_tokens,omitempty"`
	CacheWriteInputTokens int64 `json:"cache_write_input_tokens,omitempty"`
	OutputTokens          int64 `json:"output_tokens"`
	// Model names the model that answered, such as
	// "anthropic:claude-sonnet-4-5".
	Model string `json:"model,omitempty"`
}

// Add adds o's token counts to u (the model is kept).
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.CachedInputTokens += o.CachedInputTokens
	u.CacheWriteInputTokens += o.CacheWriteInputTokens
	u.OutputTokens += o.OutputTokens
}

// Messages stores thread histories.
type Messages interface {
	// AppendMessages appends msgs to the thread's history, assigning Seq
	// (and Created when zero), and returns them as stored.
	AppendMessages(threadID string, msgs []Message) ([]Message, error)
	// History returns the thread's messages in order, the part inherited
	// from its ancestors (see Thread.InheritSeq) first.
	History(threadID string) ([]Message, error)
	// HistorySince returns the messages History would return whose Seq is
	// greater than after. Histories are append-only and each thread's Seqs
	// are contiguous, so a prefix read earlier plus HistorySince(last Seq of
	// that prefix) is the whole history: callers may cache the prefix.
	HistorySince(threadID string, after int64) ([]Message, error)
	// LastSeq returns the Seq of the thread's last message, inherited ones
	// included; 0 for an empty history.
	LastSeq(threadID string) (int64, error)
}

// InboxKind says what an inbox item carries. Kinds are extensible: a later
// kind needs only a handler in the engine.
type InboxKind string

// Inbox kinds.
const (
	// KindUserMessage carries a UserMessage payload.
	KindUserMessage InboxKind = "user_message"
	// KindToolResult carries a ToolResult payload (from a callback, a
	// dispatch failure or a timeout).
	KindToolResult InboxKind = "tool_result"
	// KindSubscriptionEvent carries a rap.SubscriptionEvent payload.
	KindSubscriptionEvent InboxKind = "subscription_event"
	// KindNote carries a UserMessage payload written by the runtime, not by
	// a person: the instructions of an event thread, a message from the
	// parent thread. Unlike a user message it interrupts nothing.
	KindNote InboxKind = "note"
	// KindChildReport carries a ChildReport payload: a child thread's
	// report to its parent (RAP BT-3).
	KindChildReport InboxKind = "child_report"
	// KindWake carries no history: it makes the thread run a completion
	// over its history as it is (a freshly spawned child thread).
	KindWake InboxKind = "wake"
)

// ChildReport is the payload of a KindChildReport inbox item.
type ChildReport struct {
	// ChildID is the reporting thread.
	ChildID string `json:"child_id"`
	// OriginCallID, OriginTool and OriginArgs are the child's origin (see
	// Thread): the report is injected as an event of that call.
	OriginCallID string          `json:"origin_call_id"`
	OriginTool   string          `json:"origin_tool"`
	OriginArgs   json.RawMessage `json:"origin_args,omitempty"`
	Report       string          `json:"report"`
	// Final is true when the child closed itself with this report.
	Final bool `json:"final,omitempty"`
}

// UserMessage is the payload of a KindUserMessage inbox item.
type UserMessage struct {
	Text string `json:"text"`
}

// InboxItem is one durable message that wakes a thread.
type InboxItem struct {
	// ID is assigned by Enqueue and orders a thread's items.
	ID       int64           `json:"id"`
	ThreadID string          `json:"thread_id"`
	Kind     InboxKind       `json:"kind"`
	Payload  json.RawMessage `json:"payload"`
	// DedupKey identifies the message: enqueueing a key that was ever
	// enqueued before (even if long consumed) is a no-op (RAP RE-6).
	DedupKey string    `json:"dedup_key"`
	Created  time.Time `json:"created"`
	// Once says that the caller's own transaction already makes this item
	// unique, so Enqueue need not remember DedupKey once the item is
	// consumed: a call's result, enqueued only by the transaction whose
	// conditional SetCallState moved the call from pending to done. Its
	// key is not marked seen (one write less per tool result); while the item
	// is queued, another with the same key is not added.
	Once bool `json:"-"`
}

// Inbox is the durable, deduplicated queue of messages that wake threads.
type Inbox interface {
	// Enqueue adds item unless its DedupKey was seen before (or, for an
	// item marked Once, is queued now). It reports whether the item was
	// added.
	Enqueue(item InboxItem) (added bool, err error)
	// SeenKey reports whether key was ever enqueued.
	SeenKey(key string) (bool, error)
	// MarkKeySeen records key as seen without enqueueing anything; it
	// reports false if key was already seen.
	MarkKeySeen(threadID, key string) (bool, error)
	// Queued returns every unconsumed item of the thread, oldest first.
	Queued(threadID string) ([]InboxItem, error)
	// QueuedThreads returns the ids of threads with unconsumed items.
	QueuedThreads() ([]string, error)
	// Consume removes the items with the given ids from the queue; their
	// dedup keys stay seen. When one of them is not queued (already
	// consumed, by this or another process) it returns an error wrapping
	// ErrConsumed, and the caller must let the transaction fail: of two
	// transactions consuming one item, exactly one commits.
	Consume(ids []int64) error
}

// CallState is the lifecycle state of a tool call.
type CallState string

// Call states. A call is "pending" while it is new or dispatched.
const (
	// CallNew: persisted with its turn, not yet accepted by the tool.
	CallNew CallState = "new"
	// CallDispatched: the tool answered 200 to the invocation.
	CallDispatched CallState = "dispatched"
	// CallDone: its result (real or synthetic) is in the inbox or history.
	CallDone CallState = "done"
	// CallCancelled: the runtime gave up on it; late results are ignored
	// (RAP CA-2).
	CallCancelled CallState = "cancelled"
)

// Pending reports whether a call in state s still waits for its result.
func (s CallState) Pending() bool { return s == CallNew || s == CallDispatched }

// Call is a tool call the runtime dispatched or will dispatch.
type Call struct {
	ThreadID  string          `json:"thread_id"`
	CallID    string          `json:"call_id"`
	ToolName  string          `json:"tool_name"`
	Arguments json.RawMessage `json:"arguments"`
	// Toolset and Endpoint say where the invocation goes.
	Toolset  string `json:"toolset"`
	Endpoint string `json:"endpoint"`
	// TurnSeq is the Seq of the assistant message that made the call.
	TurnSeq int64     `json:"turn_seq"`
	State   CallState `json:"state"`
	// Deadline, when not zero, is when a synthetic timeout result is due
	// (RAP RT-5).
	Deadline time.Time `json:"deadline,omitzero"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
}

// Calls stores tool calls and their states.
type Calls interface {
	// PutCalls inserts calls. A (thread, call id) pair that exists is an
	// error.
	PutCalls(calls []Call) error
	// Call returns one call, or an error wrapping ErrNotFound.
	Call(threadID, callID string) (Call, error)
	// SetCallState moves a call to state `to` if its current state is one of
	// `from` (any state when from is empty). It reports whether it changed.
	SetCallState(threadID, callID string, to CallState, from ...CallState) (bool, error)
	// CallsInState returns the calls of any thread in state s, oldest first.
	CallsInState(s CallState) ([]Call, error)
	// ThreadCalls returns the calls of one thread, oldest first.
	ThreadCalls(threadID string) ([]Call, error)
	// PendingCalls returns the calls of one thread that still wait for a
	// result (CallState.Pending), oldest first.
	PendingCalls(threadID string) ([]Call, error)
	// DueCalls returns pending calls whose deadline is at or before now.
	DueCalls(now time.Time) ([]Call, error)
	// NextDeadline returns the earliest deadline of a pending call.
	NextDeadline() (t time.Time, ok bool, err error)
	// OldestPendingCalls returns up to limit pending calls
	// (CallState.Pending) that come after `after` in the order of their
	// creation (Created, then ThreadID, then CallID); the zero cursor
	// starts at the oldest. When userID is not "", only the calls of the
	// threads of that user's sessions (Thread.UserID) are returned.
	// Backed by an index of the pending calls in that order: a page
	// costs O(log n + limit). For a user, a store may instead read the
	// pending calls of that user's threads by thread and sort them.
	OldestPendingCalls(userID string, after CallCursor, limit int) ([]Call, error)
}

// CallCursor is a position in the order of calls by creation (Created,
// then ThreadID, then CallID): the last call of the previous page. The
// zero cursor is the start.
type CallCursor struct {
	Created  time.Time
	ThreadID string
	CallID   string
}

// CallCursorOf returns the cursor just after c.
func CallCursorOf(c Call) CallCursor {
	return CallCursor{Created: c.Created, ThreadID: c.ThreadID, CallID: c.CallID}
}

// SubscriptionState is the state of a subscription.
type SubscriptionState string

// Subscription states.
const (
	SubscriptionActive    SubscriptionState = "active"
	SubscriptionFinal     SubscriptionState = "final"
	SubscriptionCancelled SubscriptionState = "cancelled"
)

// Subscription is a call whose result confirmed a subscription (RAP SU-3).
type Subscription struct {
	ThreadID string            `json:"thread_id"`
	CallID   string            `json:"call_id"`
	ToolName string            `json:"tool_name"`
	State    SubscriptionState `json:"state"`
	Created  time.Time         `json:"created"`
}

// Subscriptions stores subscriptions.
type Subscriptions interface {
	// PutSubscription inserts or replaces s.
	PutSubscription(s Subscription) error
	// Subscription returns one subscription, or an error wrapping ErrNotFound.
	Subscription(threadID, callID string) (Subscription, error)
	// ThreadSubscriptions returns a thread's subscriptions.
	ThreadSubscriptions(threadID string) ([]Subscription, error)
}

// View is the latest content of one named view of a thread (RAP VU-2).
type View struct {
	ThreadID string          `json:"thread_id"`
	ViewType string          `json:"view_type"`
	Content  json.RawMessage `json:"content"`
	Updated  time.Time       `json:"updated"`
}

// Views stores views.
type Views interface {
	// PutView inserts or overwrites the view (thread, view type).
	PutView(v View) error
	// ThreadViews returns a thread's views ordered by view type.
	ThreadViews(threadID string) ([]View, error)
}

// Timer is a durable wake-up: when Due passes, the engine acts on it.
type Timer struct {
	ID       string          `json:"id"`
	ThreadID string          `json:"thread_id"`
	Kind     string          `json:"kind"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	Due      time.Time       `json:"due"`
	Created  time.Time       `json:"created"`
}

// Timers stores timers.
type Timers interface {
	// PutTimer inserts or replaces a timer.
	PutTimer(t Timer) error
	// DeleteTimer removes a timer; an unknown id is not an error.
	DeleteTimer(id string) error
	// DueTimers returns timers due at or before now, earliest first.
	DueTimers(now time.Time) ([]Timer, error)
	// NextTimer returns the earliest due time of any timer.
	NextTimer() (t time.Time, ok bool, err error)
}

// CachedToolset is one raw toolset manifest cached for a session (RAP TS-7).
type CachedToolset struct {
	// RootID is the session's root thread.
	RootID string `json:"root_id"`
	// BaseURL is the configured tool server base URL it came from.
	BaseURL string `json:"base_url"`
	// Manifest is the raw JSON manifest as fetched.
	Manifest json.RawMessage `json:"manifest"`
	Fetched  time.Time       `json:"fetched"`
}

// ToolsetCache stores fetched manifests per session.
type ToolsetCache interface {
	// PutToolset inserts or replaces the manifest of (root, base URL).
	PutToolset(c CachedToolset) error
	// SessionToolsets returns the manifests cached for a session.
	SessionToolsets(rootID string) ([]CachedToolset, error)
	// LatestToolset returns the most recently fetched manifest of baseURL
	// from any session, or an error wrapping ErrNotFound.
	LatestToolset(baseURL string) (CachedToolset, error)
}

// ToolsetTrust keeps, per session, the digest of the discovery document
// a session trusted on first use for a tool server (a toolset_server entry
// with "pin": "first_use"), so that a different document is refused for
// the rest of the session, across restarts and on every process sharing
// the store. Unlike the cached manifest, a recorded digest is never
// replaced.
type ToolsetTrust interface {
	// TrustToolset records sha256 as the trusted digest of (rootID,
	// baseURL) unless one is recorded already, and returns the recorded
	// one: sha256 itself the first time, the first digest ever after.
	TrustToolset(rootID, baseURL, sha256 string) (string, error)
}

// Choice is a user choice a tool asked for (RAP UC-1) and the user has not
// answered yet. ResponseURL may hold a key: never log it.
type Choice struct {
	ThreadID    string    `json:"thread_id"`
	CallID      string    `json:"call_id"`
	ToolName    string    `json:"tool_name"`
	Prompt      string    `json:"prompt"`
	Choices     []string  `json:"choices"`
	Default     int       `json:"default"`
	ResponseURL string    `json:"-"`
	Created     time.Time `json:"created"`
	// Fields, when set, make this a user input (the user_input gorap
	// extension) rather than a choice: the JSON array of its
	// rap.InputField. Choices and Default are then unused.
	Fields json.RawMessage `json:"fields,omitempty"`
}

// Choices stores the user choices waiting for an answer.
type Choices interface {
	// PutChoice inserts or replaces the choice of (thread, call).
	PutChoice(c Choice) error
	// TakeChoice returns the choice of (thread, call) and deletes it, so a
	// choice is answered at most once; an error wrapping ErrNotFound when
	// there is none.
	TakeChoice(threadID, callID string) (Choice, error)
	// ThreadChoices returns the thread's waiting choices, oldest first.
	ThreadChoices(threadID string) ([]Choice, error)
}

// HeldEvent is a subscription event that arrived while its call was still
// pending, before the tool_result confirming the subscription (RAP SU-1,
// SU-3). It is applied once the subscription is confirmed, or discarded
// when the call ends without one.
type HeldEvent struct {
	// ID is assigned by HoldEvent and orders the held events of a call in
	// arrival order.
	ID       int64  `json:"id"`
	ThreadID string `json:"thread_id"`
	CallID   string `json:"call_id"`
	// Payload is the event as a rap.SubscriptionEvent JSON object.
	Payload json.RawMessage `json:"payload"`
	Created time.Time       `json:"created"`
}

// HeldStats sizes the held events of one call and of the whole store, so
// the runtime can bound them.
type HeldStats struct {
	// Count and Bytes are the number and payload bytes of the call's held
	// events.
	Count int
	Bytes int64
	// TotalBytes is the payload bytes of every held event in the store.
	TotalBytes int64
}

// HeldEvents stores subscription events waiting for their subscription to
// be confirmed.
type HeldEvents interface {
	// HoldEvent appends e to its call's held events.
	HoldEvent(e HeldEvent) error
	// HeldEventStats sizes the held events of (thread, call) and of the
	// whole store.
	HeldEventStats(threadID, callID string) (HeldStats, error)
	// TakeHeldEvents returns the held events of (thread, call) in arrival
	// order and deletes them; none is not an error.
	TakeHeldEvents(threadID, callID string) ([]HeldEvent, error)
	// EndedHeldCalls returns the calls that have held events but are no
	// longer pending (CallState.Pending), oldest first: their events wait
	// for a confirmation that can no longer come.
	EndedHeldCalls() ([]Call, error)
}

// CallCheck schedules a question to a tool server about one call: whether
// it still knows the call (POST {base}/tool_call_status). The runtime adds
// one for every call that stays dispatched for a while (UncheckedCalls)
// and for every active subscription, and sweeps the due ones; a check
// whose call has ended is deleted when it comes due.
type CallCheck struct {
	ThreadID string `json:"thread_id"`
	CallID   string `json:"call_id"`
	// Due is when to ask.
	Due time.Time `json:"due"`
	// Failures counts the consecutive asks that got no usable answer, for
	// backoff.
	Failures int `json:"failures"`
}

// CallChecks stores the scheduled call status checks.
type CallChecks interface {
	// PutCallCheck inserts or replaces the check of (thread, call).
	PutCallCheck(c CallCheck) error
	// AddCallCheck inserts the check of (thread, call) unless it has one;
	// it reports whether it did.
	AddCallCheck(c CallCheck) (bool, error)
	// AddCallChecks is AddCallCheck for many checks at once (one round
	// trip on a database server); it reports how many it inserted.
	AddCallChecks(cs []CallCheck) (int, error)
	// UncheckedCalls returns up to limit dispatched calls that have no
	// check, were last updated at or before `before` and are not of
	// toolset skip, in no particular order.
	UncheckedCalls(before time.Time, skip string, limit int) ([]Call, error)
	// DeleteCallCheck removes the check of (thread, call); none is not an
	// error.
	DeleteCallCheck(threadID, callID string) error
	// DueCallChecks returns up to limit checks due at or before now,
	// earliest first.
	DueCallChecks(now time.Time, limit int) ([]CallCheck, error)
	// NextCallCheck returns the earliest due time of any check.
	NextCallCheck() (t time.Time, ok bool, err error)
	// AdvanceCallChecks makes every check due at or before `due` (after a
	// restart: ask about every call once) and reports how many changed.
	AdvanceCallChecks(due time.Time) (int64, error)
}

// Shared is implemented by a store that several processes may use at once
// (PostgreSQL). On such a store the engine takes a lease of each thread it
// works on and a claim of each timer it fires (its transactions implement
// Leases), and sweeps the store for work other processes left. A store
// without it (SQLite) is held by one process, whose engine keeps its
// claims in memory.
type Shared interface {
	// SharedByProcesses reports whether several processes may use the
	// store at once.
	SharedByProcesses() bool
	// StoreID identifies the store: every process that opens it gets the
	// same id, which another store is unlikely to have. Client event ids
	// carry it, so that an id another store made is not resumed here. It
	// may change when the store moves (a restore elsewhere): clients then
	// start afresh once.
	StoreID() string
}

// Leases let several processes sharing one store split the work: a thread is
// worked on by the process holding its lease, and a due timer is fired by the
// process that claimed it. A lease names its owner (a process's unique id)
// and lives until its expiry; one whose owner died expires and can be taken
// by another. Times are the callers' clocks: processes sharing a store need
// clocks in step to well within a lease.
//
// It is not part of Tx: only the transactions of a Shared store implement
// it (the engine asserts it there, and only there). A store one process
// holds has nobody to split the work with.
type Leases interface {
	// ClaimThread gives owner the thread's lease until `until` and
	// reports true, unless another owner's lease lives at now (expires
	// after now): then it reports false and changes nothing. Claiming a
	// thread owner holds renews its lease.
	ClaimThread(threadID, owner string, now, until time.Time) (bool, error)
	// ReleaseThread ends owner's lease of the thread; another owner's
	// lease, or none, is left alone and is not an error.
	ReleaseThread(threadID, owner string) error
	// ThreadLease returns the owner and expiry of the thread's lease, or
	// an error wrapping ErrNotFound when it has none.
	ThreadLease(threadID string) (owner string, until time.Time, err error)
	// ClaimTimer gives owner the claim of timer id until `until` and
	// reports true, unless the timer does not exist or another owner's
	// claim lives at now. The owner fires the timer and deletes it; a
	// claim whose owner died before that expires, and another fires it.
	// PutTimer of the timer's id drops its claim.
	ClaimTimer(id, owner string, now, until time.Time) (bool, error)
}

// CallbackKeys are the HMAC keys of callback tokens,
// shared by every process of a store so that a callback URL minted by one
// is accepted by all. They are secrets: never log them.
type CallbackKeys struct {
	// Current signs new tokens and verifies them.
	Current []byte
	// Previous is the key before the last rotation, still accepted until
	// PreviousUntil so that URLs already handed to tools keep working.
	Previous      []byte
	PreviousUntil time.Time
}

// CallbackKeyStore keeps the callback keys.
type CallbackKeyStore interface {
	// CallbackKeys returns the stored keys, or an error wrapping
	// ErrNotFound when none was stored yet.
	CallbackKeys() (CallbackKeys, error)
	// InitCallbackKey stores key as the current key unless one is stored,
	// and returns the keys stored after the call: of processes starting
	// together, the first to commit wins and all use its key.
	InitCallbackKey(key []byte) (CallbackKeys, error)
	// RotateCallbackKey makes key the current key and the current one the
	// previous, accepted until graceUntil.
	RotateCallbackKey(key []byte, graceUntil time.Time) error
}

// OAuthLink is an oauth event (RAP OA-1) kept for the short time clients
// may still need it, so that a client connected to any process sharing
// the store can be shown it. Its Event holds the auth URL, which may carry
// a key: never log it.
type OAuthLink struct {
	ThreadID string `json:"thread_id"`
	CallID   string `json:"call_id"`
	// Event is the event data as clients receive it.
	Event   json.RawMessage `json:"event"`
	Created time.Time       `json:"created"`
	// Expires is when the link is of no more use and may be deleted.
	Expires time.Time `json:"expires"`
}

// OAuthLinks stores the short-lived oauth links.
type OAuthLinks interface {
	// PutOAuthLink inserts or replaces the link of (thread, call).
	PutOAuthLink(l OAuthLink) error
	// ThreadOAuthLinks returns the thread's links that have not expired at
	// now, oldest first.
	ThreadOAuthLinks(threadID string, now time.Time) ([]OAuthLink, error)
	// DeleteOAuthLink removes the link of (thread, call); none is not an
	// error.
	DeleteOAuthLink(threadID, callID string) error
	// DeleteExpiredOAuthLinks removes the links expired at now and reports
	// how many.
	DeleteExpiredOAuthLinks(now time.Time) (int64, error)
}

// ThreadEvent is one client event of a thread kept in a shared store, so
// that a client of any process sees it and can resume after it. Its Data may
// hold secrets (oauth links): never log it.
type ThreadEvent struct {
	ThreadID string `json:"thread_id"`
	// ID is the event's number in its thread, given by
	// AppendThreadEvents: 1, 2, 3… in the order the appends committed, so
	// a reader that sees ID n can read every ID below it.
	ID   int64           `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
	// MsgSeq is the Seq of the saved message the event announces (message,
	// tool_call, tool_result), 0 for other events.
	MsgSeq  int64     `json:"msg_seq,omitempty"`
	Created time.Time `json:"created"`
}

// ThreadEvents keeps the recent client events of each thread. The engine
// writes them only on a Shared store; on one a single process holds, events
// stay in memory.
type ThreadEvents interface {
	// AppendThreadEvents appends events, of one thread or several, in
	// order: each gets the next ID of its thread. It returns them with
	// their IDs (and Created, when zero, set to the transaction's time). A
	// store whose processes can listen (EventListener) tells them at
	// commit.
	AppendThreadEvents(events []ThreadEvent) ([]ThreadEvent, error)
	// ThreadEventsAfter returns up to limit of the thread's kept events
	// whose ID is above after, in ID order.
	ThreadEventsAfter(threadID string, after int64, limit int) ([]ThreadEvent, error)
	// LastThreadEventID returns the ID of the thread's last appended
	// event, 0 when it has none; pruning does not lower it.
	LastThreadEventID(threadID string) (int64, error)
	// PruneThreadEvents deletes the events created before `before` and
	// those with more than keep newer events in their thread, and reports
	// how many it deleted.
	PruneThreadEvents(before time.Time, keep int) (int64, error)
}

// StateFacts are what a thread's state is computed from, read together:
// the thread, its queued inputs, timers, open user choices, pending calls
// and subscriptions, and the seq of its last message (LastSeq).
type StateFacts struct {
	Thread        Thread
	Queued        []InboxItem
	Timers        []Timer
	Choices       []Choice
	PendingCalls  []Call
	Subscriptions []Subscription
	LastSeq       int64
}

// StateFactsReader is implemented by a Tx that reads a thread's
// StateFacts in one exchange with its database server; where it is, the
// runtime reads them so instead of one by one. StateFacts returns an error
// wrapping ErrNotFound when the thread does not exist.
type StateFactsReader interface {
	StateFacts(threadID string) (StateFacts, error)
}

// EventListener is implemented by a shared store that tells its processes
// when thread events were appended (PostgreSQL LISTEN/NOTIFY).
type EventListener interface {
	// ListenThreadEvents calls notify with the thread and its last event
	// ID for each append other processes (or this one) commit, until ctx
	// ends or the connection fails; it returns why it stopped. Callers
	// poll as well: a notification may be lost while reconnecting.
	ListenThreadEvents(ctx context.Context, notify func(threadID string, lastID int64)) error
}

// TextDelta is a piece of the text a model streams in one process, relayed
// to the other processes of a shared store without being stored.
type TextDelta struct {
	ThreadID string
	// After is the ID of the thread's stored event (ThreadEvent.ID) the
	// piece follows.
	After int64
	// Turn identifies the completion the text belongs to.
	Turn string
	// Offset is the length in bytes of the turn's text before Text.
	Offset int
	Text   string
}
