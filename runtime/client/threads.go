package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"strconv"

	"github.com/gorap/gorap/runtime/api"
)

// CreateThread starts a new session (POST /v1/threads).
func (c *Client) CreateThread(ctx context.Context, req api.CreateThreadRequest) (*api.CreateThreadResponse, error) {
	var out api.CreateThreadResponse
	if err := c.do(ctx, "POST", "/v1/threads", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListOptions selects a page of GET /v1/threads.
type ListOptions struct {
	// Limit is the most threads per page; 0 is the runtime's default (100).
	Limit int
	// Cursor is the NextCursor of the previous page; empty for the first.
	Cursor string
	// ParentID, when set, lists only that thread's children.
	ParentID string
	// UserID, when set, lists only the threads of that user's sessions
	// (not together with ParentID).
	UserID string
	// Query, when it has words, lists only the threads of sessions whose
	// title or first user message holds every word, ignoring case (at
	// most api.MaxSearchChars characters).
	Query string
	// Archived is api.ArchivedExclude (leave archived sessions out, as the
	// web UI's list does), api.ArchivedInclude or api.ArchivedOnly. Empty
	// lists the threads of archived sessions too (api.ArchivedInclude), as
	// this client did before sessions could be archived; GET /v1/threads
	// without archived= leaves them out.
	Archived string
}

// ListThreads returns one page of threads, oldest first (GET /v1/threads).
// Its NextCursor, when set, is the Cursor of the next page.
func (c *Client) ListThreads(ctx context.Context, opts ListOptions) (*api.ThreadPage, error) {
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.ParentID != "" {
		q.Set("parent_id", opts.ParentID)
	}
	if opts.UserID != "" {
		q.Set("user_id", opts.UserID)
	}
	if opts.Query != "" {
		q.Set("q", opts.Query)
	}
	archived := opts.Archived
	if archived == "" {
		archived = api.ArchivedInclude
	}
	q.Set("archived", archived)
	path := "/v1/threads"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.ThreadPage
	if err := c.do(ctx, "GET", path, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Threads yields every thread opts selects (every thread, or with
// opts.ParentID every child of that thread), reading page after page
// from opts.Cursor on. It stops at the first error, which it yields.
func (c *Client) Threads(ctx context.Context, opts ListOptions) iter.Seq2[api.Thread, error] {
	return func(yield func(api.Thread, error) bool) {
		for {
			page, err := c.ListThreads(ctx, opts)
			if err != nil {
				yield(api.Thread{}, err)
				return
			}
			for _, t := range page.Threads {
				if !yield(t, nil) {
					return
				}
			}
			if page.NextCursor == "" {
				return
			}
			opts.Cursor = page.NextCursor
		}
	}
}

// Children returns every child thread of a thread, oldest first.
func (c *Client) Children(ctx context.Context, threadID string) ([]api.Thread, error) {
	var out []api.Thread
	for t, err := range c.Threads(ctx, ListOptions{ParentID: threadID, Limit: 1000}) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// UpdateThread changes what req names of the session whose root thread
// is threadID (PATCH /v1/threads/{id}): its title, whether it is
// archived. It returns the root thread as the thread list shows it.
func (c *Client) UpdateThread(ctx context.Context, threadID string, req api.UpdateThreadRequest) (*api.Thread, error) {
	var out api.Thread
	if err := c.do(ctx, "PATCH", threadPath(threadID), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RenameThread sets the title of the session whose root thread is
// threadID (at most api.MaxTitleChars characters); "" goes back to the
// title derived from its first user message.
func (c *Client) RenameThread(ctx context.Context, threadID, title string) (*api.Thread, error) {
	return c.UpdateThread(ctx, threadID, api.UpdateThreadRequest{Title: &title})
}

// ArchiveThread archives the session whose root thread is threadID
// (archived true), or brings it back (false). The thread list leaves
// archived sessions out unless asked (ListOptions.Archived).
func (c *Client) ArchiveThread(ctx context.Context, threadID string, archived bool) (*api.Thread, error) {
	return c.UpdateThread(ctx, threadID, api.UpdateThreadRequest{Archived: &archived})
}

// Thread returns a thread's state (GET /v1/threads/{id}): its pending
// calls, subscriptions, children, open choices and last Seq.
func (c *Client) Thread(ctx context.Context, threadID string) (*api.ThreadInfo, error) {
	var out api.ThreadInfo
	if err := c.do(ctx, "GET", threadPath(threadID), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// History returns a thread's messages (GET /v1/threads/{id}/messages).
func (c *Client) History(ctx context.Context, threadID string) ([]api.Message, error) {
	var out api.HistoryResponse
	if err := c.do(ctx, "GET", threadPath(threadID, "messages"), nil, &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// maxSendAttempts is how often PostMessage sends a message whose answer
// was lost before it gives up.
const maxSendAttempts = 3

// PostMessage sends a user message to a thread (POST
// /v1/threads/{id}/messages). It sends an Idempotency-Key, so that it can
// send again when the connection fails before the answer: the runtime adds
// the message once.
func (c *Client) PostMessage(ctx context.Context, threadID, text string) (*api.PostMessageResponse, error) {
	return c.PostMessageWithKey(ctx, threadID, text, newKey())
}

// PostMessageWithKey is PostMessage with the caller's Idempotency-Key: the
// runtime adds a message once per key and thread, whatever the number of
// calls.
func (c *Client) PostMessageWithKey(ctx context.Context, threadID, text, key string) (*api.PostMessageResponse, error) {
	var out api.PostMessageResponse
	var err error
	for range maxSendAttempts {
		err = c.do(ctx, "POST", threadPath(threadID, "messages"), api.PostMessageRequest{Text: &text}, &out, "Idempotency-Key", key)
		var apiErr *Error
		if err == nil || errors.As(err, &apiErr) || ctx.Err() != nil {
			break // answered (or given up): only a lost answer is retried
		}
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// newKey returns a random Idempotency-Key.
func newKey() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Choices returns the user choices waiting for an answer (GET
// /v1/threads/{id}/choices).
func (c *Client) Choices(ctx context.Context, threadID string) ([]api.Choice, error) {
	var out api.ChoicesResponse
	if err := c.do(ctx, "GET", threadPath(threadID, "choices"), nil, &out); err != nil {
		return nil, err
	}
	return out.Choices, nil
}

// AnswerChoice answers a user choice with the index of the selected
// option (POST /v1/threads/{id}/choices/{call_id}, RAP UC-2).
func (c *Client) AnswerChoice(ctx context.Context, threadID, callID string, selected int) (*api.AnswerChoiceResponse, error) {
	return c.answer(ctx, threadID, callID, api.AnswerChoiceRequest{Selected: &selected})
}

// DismissChoice dismisses a user choice: the tool gets its default.
func (c *Client) DismissChoice(ctx context.Context, threadID, callID string) (*api.AnswerChoiceResponse, error) {
	return c.answer(ctx, threadID, callID, api.AnswerChoiceRequest{Dismiss: true})
}

func (c *Client) answer(ctx context.Context, threadID, callID string, req api.AnswerChoiceRequest) (*api.AnswerChoiceResponse, error) {
	var out api.AnswerChoiceResponse
	if err := c.do(ctx, "POST", threadPath(threadID, "choices", callID), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Inputs returns the user inputs waiting for an answer (GET
// /v1/threads/{id}/inputs; the user_input gorap extension).
func (c *Client) Inputs(ctx context.Context, threadID string) ([]api.Input, error) {
	var out api.InputsResponse
	if err := c.do(ctx, "GET", threadPath(threadID, "inputs"), nil, &out); err != nil {
		return nil, err
	}
	return out.Inputs, nil
}

// AnswerInput answers a user input with the values of its fields (POST
// /v1/threads/{id}/inputs/{call_id}). Values that do not fit the form
// are refused (400) with an error naming the field.
func (c *Client) AnswerInput(ctx context.Context, threadID, callID string, values map[string]json.RawMessage) (*api.AnswerInputResponse, error) {
	if values == nil {
		values = map[string]json.RawMessage{}
	}
	return c.answerInput(ctx, threadID, callID, api.AnswerInputRequest{Values: values})
}

// DismissInput declines a user input: the tool is told it was dismissed.
func (c *Client) DismissInput(ctx context.Context, threadID, callID string) (*api.AnswerInputResponse, error) {
	return c.answerInput(ctx, threadID, callID, api.AnswerInputRequest{Dismiss: true})
}

func (c *Client) answerInput(ctx context.Context, threadID, callID string, req api.AnswerInputRequest) (*api.AnswerInputResponse, error) {
	var out api.AnswerInputResponse
	if err := c.do(ctx, "POST", threadPath(threadID, "inputs", callID), req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CloseThread closes a thread (POST /v1/threads/{id}/close); closing a
// closed thread is not an error.
func (c *Client) CloseThread(ctx context.Context, threadID string) error {
	var out api.CloseResponse
	if err := c.do(ctx, "POST", threadPath(threadID, "close"), struct{}{}, &out); err != nil {
		return err
	}
	if out.Status != "closed" {
		return fmt.Errorf("POST %s: unexpected status %q", threadPath(threadID, "close"), out.Status)
	}
	return nil
}
