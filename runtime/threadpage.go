package runtime

// This file owns the Go API's answers that the client API sends as they
// are: a new session with its toolsets (POST /v1/threads), a page of
// threads with its cursor (GET /v1/threads) and a thread's state (GET
// /v1/threads/{id}).

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// CreateSession is CreateThreadFor that also returns the toolsets
// discovery loaded for the new session, as POST /v1/threads answers.
func (r *Runtime) CreateSession(ctx context.Context, userID string) (api.CreateThreadResponse, error) {
	id, err := r.CreateThreadFor(ctx, userID)
	if err != nil {
		return api.CreateThreadResponse{}, err
	}
	resp := api.CreateThreadResponse{ID: id}
	r.mu.Lock()
	if s := r.catalogs[id]; s != nil {
		resp.Toolsets = s.toolsets()
	}
	r.mu.Unlock()
	return resp, nil
}

// ThreadsPage returns one page of threads, oldest first, archived
// sessions' included: FindThreads of parentID, cursor and limit with
// Archived api.ArchivedInclude.
func (r *Runtime) ThreadsPage(ctx context.Context, parentID, cursor string, limit int) (api.ThreadPage, error) {
	return r.FindThreads(ctx, api.ThreadQuery{ParentID: parentID, Cursor: cursor, Limit: limit, Archived: api.ArchivedInclude})
}

// UserThreadsPage is ThreadsPage for the threads of one user's sessions
// (roots and children), as GET /v1/threads?user_id= answers it: `rap
// delete --user` finds a user's sessions with it. A Caller bound to
// another user lists nothing. An empty userID wraps ErrBadInput.
func (r *Runtime) UserThreadsPage(ctx context.Context, userID, cursor string, limit int) (api.ThreadPage, error) {
	if userID == "" {
		return api.ThreadPage{Threads: []api.Thread{}}, inputError("user id is empty: name the user whose threads to list")
	}
	return r.FindThreads(ctx, api.ThreadQuery{UserID: userID, Cursor: cursor, Limit: limit, Archived: api.ArchivedInclude})
}

// FindThreads returns one page of the threads q selects, oldest first,
// as GET /v1/threads answers it: up to q.Limit threads (below 1:
// api.DefaultPageLimit; at most api.MaxPageLimit) after q.Cursor (the
// NextCursor of the previous page, "" to start); only the children of
// q.ParentID, or the threads of q.UserID's sessions, when set; only those
// of sessions whose title or first user message holds every word of
// q.Query, ignoring case; and as q.Archived says for archived sessions
// (see api.ThreadQuery). NextCursor is empty on the last page. For a
// Caller bound to a user (WithCaller) only that user's threads are
// listed; the children of another user's thread, as of an unknown one,
// are none. A cursor this runtime did not make, an archived value it
// does not know, a query longer than api.MaxSearchChars or both a parent
// and a user wrap ErrBadInput.
func (r *Runtime) FindThreads(ctx context.Context, q api.ThreadQuery) (api.ThreadPage, error) {
	resp := api.ThreadPage{Threads: []api.Thread{}}
	f, err := threadFilter(q)
	if err != nil {
		return resp, err
	}
	limit := q.Limit
	if limit < 1 {
		limit = api.DefaultPageLimit
	}
	limit = min(limit, api.MaxPageLimit)
	after, err := decodeCursor(q.Cursor)
	if err != nil {
		return resp, err
	}
	user, scoped := api.ScopedUser(ctx)
	switch {
	case scoped && f.UserID != "" && f.UserID != user:
		return resp, nil // another user's threads: none to see
	case scoped && f.ParentID == "":
		f.UserID = user
	}
	var page []store.Thread
	err = r.store.View(ctx, func(tx store.Tx) error {
		if scoped && f.ParentID != "" {
			// Children belong to their parent's user: a foreign parent
			// lists nothing, as an unknown one does.
			p, err := tx.Thread(f.ParentID)
			if errors.Is(err, store.ErrNotFound) || (err == nil && p.UserID != user) {
				return nil
			}
			if err != nil {
				return err
			}
		}
		var err error
		page, err = tx.FindThreads(f, after, limit+1)
		return err
	})
	if err != nil {
		return resp, err
	}
	if len(page) > limit {
		page = page[:limit]
		resp.NextCursor = encodeCursor(store.CursorOf(page[limit-1]))
	}
	resp.Threads = append(resp.Threads, apiSlice(page, apiThread)...)
	return resp, nil
}

// threadFilter checks q and returns the store's filter of it.
func threadFilter(q api.ThreadQuery) (store.ThreadFilter, error) {
	f := store.ThreadFilter{ParentID: q.ParentID, UserID: q.UserID, Search: strings.TrimSpace(q.Query)}
	if f.ParentID != "" && f.UserID != "" {
		return f, inputError("give parent_id or user_id, not both (a child belongs to its parent's user)")
	}
	if n := utf8.RuneCountInString(f.Search); n > api.MaxSearchChars {
		return f, inputError(fmt.Sprintf("q has %d characters; the limit is %d: search for fewer words", n, api.MaxSearchChars))
	}
	switch q.Archived {
	case "":
		f.Archived = store.ArchivedExcluded
		if f.ParentID != "" || f.UserID != "" {
			f.Archived = store.ArchivedIncluded
		}
	case api.ArchivedExclude:
		f.Archived = store.ArchivedExcluded
	case api.ArchivedInclude:
		f.Archived = store.ArchivedIncluded
	case api.ArchivedOnly:
		f.Archived = store.ArchivedOnly
	default:
		return f, inputError(fmt.Sprintf("archived %q: want %s (leave archived sessions out), %s or %s (archived sessions alone)",
			q.Archived, api.ArchivedExclude, api.ArchivedInclude, api.ArchivedOnly))
	}
	return f, nil
}

// maxStatusChildren is how many children GET /v1/threads/{id} lists; past
// it the answer has children_next_cursor, to read the rest from
// GET /v1/threads?parent_id={id}&cursor=.
const maxStatusChildren = 1000

// encodeCursor makes an opaque page cursor of c.
func encodeCursor(c store.ThreadCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.Created.UnixNano(), 10) + ":" + c.ID))
}

// inputError is input the runtime refuses (it wraps ErrBadInput) whose
// text is its message alone.
type inputError string

func (e inputError) Error() string        { return string(e) }
func (e inputError) Is(target error) bool { return target == ErrBadInput }

// decodeCursor reads a cursor made by encodeCursor; "" is the start.
func decodeCursor(s string) (store.ThreadCursor, error) {
	if s == "" {
		return store.ThreadCursor{}, nil
	}
	bad := inputError(fmt.Sprintf("cursor %q is not one this runtime gave: pass the next_cursor of the previous page, or no cursor to start over", s))
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.ThreadCursor{}, bad
	}
	ns, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return store.ThreadCursor{}, bad
	}
	return store.ThreadCursor{Created: time.Unix(0, n).UTC(), ID: id}, nil
}

// readThreadInfo reads the answer of GET /v1/threads/{id} for th, the
// thread's record read in tx (by visibleThread).
func (r *Runtime) readThreadInfo(tx store.Tx, th store.Thread) (api.ThreadInfo, error) {
	info := api.ThreadInfo{PendingCalls: []api.Call{}, Subscriptions: []api.Subscription{}, Children: []string{}, Choices: []api.Choice{}}
	id := th.ID
	info.Thread = apiThread(th)
	// Every read below is an indexed lookup of this thread's rows:
	// no scan of all threads.
	calls, err := tx.PendingCalls(id)
	if err != nil {
		return info, err
	}
	for _, c := range calls {
		info.PendingCalls = append(info.PendingCalls, apiCall(c))
	}
	subs, err := tx.ThreadSubscriptions(id)
	if err != nil {
		return info, err
	}
	for _, s := range subs {
		info.Subscriptions = append(info.Subscriptions, apiSubscription(s))
	}
	kids, err := tx.ChildThreads(id, store.ThreadCursor{}, maxStatusChildren+1)
	if err != nil {
		return info, err
	}
	if len(kids) > maxStatusChildren {
		kids = kids[:maxStatusChildren]
		info.ChildrenNextCursor = encodeCursor(store.CursorOf(kids[len(kids)-1]))
	}
	for _, k := range kids {
		info.Children = append(info.Children, k.ID)
	}
	choices, err := tx.ThreadChoices(id)
	if err != nil {
		return info, err
	}
	info.Choices, info.Inputs = splitAsks(choices)
	q, err := tx.Queued(id)
	if err != nil {
		return info, err
	}
	info.Queued = len(q)
	if info.LastSeq, err = tx.LastSeq(id); err != nil {
		return info, err
	}
	if info.State, err = r.threadState(tx, th); err != nil {
		return info, err
	}
	if info.Usage, err = threadUsage(tx, id); err != nil {
		return info, err
	}
	if th.ParentID == "" {
		threads, err := tx.SessionThreads(id)
		if err != nil {
			return info, err
		}
		var total store.Usage
		for _, t := range threads {
			u, err := tx.ThreadUsage(t.ID)
			if err != nil {
				return info, err
			}
			total.Add(u)
		}
		info.SessionUsage = apiUsage(total)
	}
	return info, nil
}
