package api

// CreateThreadRequest is the body of POST /v1/threads.
type CreateThreadRequest struct {
	// UserID is the session's end user; empty means the
	// runtime's default.
	UserID string `json:"user_id"`
}

// CreateThreadResponse is the answer of POST /v1/threads.
type CreateThreadResponse struct {
	// ID is the new root thread's id.
	ID string `json:"id"`
	// Toolsets is what discovery loaded for the new session.
	Toolsets *Toolsets `json:"toolsets,omitempty"`
}

// Page sizes of GET /v1/threads: the default and the most one page holds.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// Values of the archived= parameter of GET /v1/threads
// (ThreadQuery.Archived): what to do with the threads of archived
// sessions.
const (
	// ArchivedExclude leaves them out: the default of the list of every
	// thread (no parent_id, no user_id).
	ArchivedExclude = "exclude"
	// ArchivedInclude lists them with the others: the default with
	// parent_id or user_id.
	ArchivedInclude = "include"
	// ArchivedOnly lists them alone.
	ArchivedOnly = "only"
)

// MaxTitleChars is the most characters (Unicode code points) a session's
// title may have.
const MaxTitleChars = 200

// MaxSearchChars is the most characters the q= of GET /v1/threads may
// have.
const MaxSearchChars = 200

// ThreadQuery is what GET /v1/threads selects, its query parameters.
type ThreadQuery struct {
	// ParentID (parent_id), when set, lists only that thread's children.
	ParentID string
	// UserID (user_id), when set, lists only the threads of that user's
	// sessions; not together with ParentID.
	UserID string
	// Cursor (cursor) is the NextCursor of the previous page; empty for
	// the first.
	Cursor string
	// Limit (limit) is the most threads of the page: below 1
	// DefaultPageLimit, at most MaxPageLimit.
	Limit int
	// Query (q), when it has words, lists only the threads of sessions
	// whose title or first user message holds every word, ignoring case;
	// at most MaxSearchChars characters.
	Query string
	// Archived (archived) is ArchivedExclude, ArchivedInclude or
	// ArchivedOnly; empty for the default: ArchivedExclude, or
	// ArchivedInclude with ParentID or UserID.
	Archived string
}

// UpdateThreadRequest is the body of PATCH /v1/threads/{id}, on a
// session's root thread: each member present changes what it names,
// the others stay as they are.
type UpdateThreadRequest struct {
	// Title, when present, is the session's new title (at most
	// MaxTitleChars characters, white space runs taken as one space);
	// "" goes back to the title derived from the first user message.
	Title *string `json:"title,omitempty"`
	// Archived, when present, archives the session (true) or brings it
	// back (false).
	Archived *bool `json:"archived,omitempty"`
}

// ThreadPage is the answer of GET /v1/threads.
type ThreadPage struct {
	Threads []Thread `json:"threads"`
	// NextCursor, when set, is the ?cursor= of the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ThreadInfo is the answer of GET /v1/threads/{id}, and the payload of
// EventThread.
type ThreadInfo struct {
	Thread
	// State says where the thread, with its children, stands.
	State ThreadState `json:"state"`
	// PendingCalls are the thread's tool calls waiting for their results,
	// oldest first.
	PendingCalls []Call `json:"pending_calls"`
	// Subscriptions are the thread's subscriptions, whatever their state.
	Subscriptions []Subscription `json:"subscriptions"`
	// Queued is how many inputs (user messages, tool results, events)
	// wait in the thread's inbox.
	Queued int `json:"queued"`
	// LastSeq is the Seq of the thread's last saved message.
	LastSeq int64 `json:"last_seq"`
	// Children are the ids of the thread's child threads, oldest first;
	// at most 1000 of them.
	Children []string `json:"children"`
	// ChildrenNextCursor, when set, says there are more children: read
	// them from GET /v1/threads?parent_id={id}&cursor={it}.
	ChildrenNextCursor string `json:"children_next_cursor,omitempty"`
	// Choices are the user choices waiting for an answer (RAP UC-1).
	Choices []Choice `json:"choices"`
	// Inputs are the user inputs waiting for an answer (the user_input
	// gorap extension); absent when there are none.
	Inputs []Input `json:"inputs,omitempty"`
	// Usage sums the tokens of the thread's completions, as saved with
	// each turn (they survive restarts and moves); nil when there were
	// none.
	Usage *Usage `json:"usage,omitempty"`
	// SessionUsage, on a root thread, sums Usage over the whole session:
	// the root and every child thread; nil when there were none.
	SessionUsage *Usage `json:"session_usage,omitempty"`
	// Budgets, on a root thread, are the budgets of the session's tools
	// that have one, with what each tool has spent of it.
	Budgets []Budget `json:"budgets,omitempty"`
	// SessionBudget, on a root thread of a runtime with a budget per
	// session, is that budget with what the session has spent of it.
	SessionBudget *SessionBudget `json:"session_budget,omitempty"`
}

// Budget is one tool's budget in a session and what it has spent: the
// estimated tokens its results added, and the model spend attributed to
// the turns that called it. A zero limit is none.
type Budget struct {
	Tool        string  `json:"tool"`
	TokensLimit int64   `json:"tokens_limit,omitempty"`
	TokensSpent int64   `json:"tokens_spent"`
	USDLimit    float64 `json:"usd_limit,omitempty"`
	USDSpent    float64 `json:"usd_spent"`
	// Unpriced, with a limit in dollars, is true when a turn that called
	// the tool was answered by a model without a known price: USDSpent
	// leaves that turn out.
	Unpriced bool `json:"unpriced,omitempty"`
}

// SessionBudget is the budget of a session and what the session has
// spent of it: the tokens (input and output, as in SessionUsage) and the
// model spend in US dollars of the completions of all its threads. A
// zero limit is none.
type SessionBudget struct {
	TokensLimit int64   `json:"tokens_limit,omitempty"`
	TokensSpent int64   `json:"tokens_spent"`
	USDLimit    float64 `json:"usd_limit,omitempty"`
	USDSpent    float64 `json:"usd_spent"`
	// Unpriced is true when some completions were of a model without a
	// known price: USDSpent leaves them out.
	Unpriced bool `json:"unpriced,omitempty"`
	// Over is true once a limit is reached: the model is not asked again
	// in the session, and its inputs wait.
	Over bool `json:"over,omitempty"`
}

// PostMessageRequest is the body of POST /v1/threads/{id}/messages.
type PostMessageRequest struct {
	Text *string `json:"text"`
}

// Statuses of PostMessageResponse.
const (
	MessageQueued    = "queued"
	MessageDuplicate = "duplicate"
)

// PostMessageResponse is the answer of POST /v1/threads/{id}/messages.
type PostMessageResponse struct {
	// Status is MessageQueued, or MessageDuplicate when the
	// Idempotency-Key was seen before.
	Status string `json:"status"`
}

// HistoryResponse is the answer of GET /v1/threads/{id}/messages.
type HistoryResponse struct {
	Messages []Message `json:"messages"`
	// Compactions are the points where the thread's older history was
	// summarised in what the model sees, oldest first; the messages are
	// all there still.
	Compactions []Compaction `json:"compactions,omitempty"`
}

// ChoicesResponse is the answer of GET /v1/threads/{id}/choices.
type ChoicesResponse struct {
	Choices []Choice `json:"choices"`
}

// AnswerChoiceRequest is the body of POST
// /v1/threads/{id}/choices/{call_id}: Selected, or Dismiss.
type AnswerChoiceRequest struct {
	Selected *int `json:"selected"`
	Dismiss  bool `json:"dismiss"`
}

// AnswerChoiceResponse is the answer of POST
// /v1/threads/{id}/choices/{call_id}.
type AnswerChoiceResponse struct {
	Status   string `json:"status"`
	Selected int    `json:"selected"`
}

// CloseResponse is the answer of POST /v1/threads/{id}/close.
type CloseResponse struct {
	Status string `json:"status"`
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Error string `json:"error"`
}
