package termchat

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/runtime/api"
)

// threadWatch follows one thread's event stream: whether it is running,
// how often it went idle or failed, and whether it was closed.
type threadWatch struct {
	id     string
	mu     sync.Mutex
	state  string // last status: "running", "idle" or "" (unknown)
	idles  int    // idle events seen
	errors int    // error events seen
	closed bool   // the thread was closed
	seq    int64  // the Seq of the last message shown
	// lastRole is the role of that message: after a tool result or a user
	// message the model still has to answer.
	lastRole api.Role
	changed  chan struct{}
}

func newThreadWatch(id string) *threadWatch {
	return &threadWatch{id: id, changed: make(chan struct{})}
}

func (w *threadWatch) note(ev Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev.Type {
	case "status":
		var s struct {
			State string `json:"state"`
		}
		if json.Unmarshal(ev.Data, &s) == nil {
			w.state = s.State
			if s.State == "idle" {
				w.idles++
			}
		}
	case "error":
		w.errors++
	case "message":
		var m struct {
			Seq  int64    `json:"seq"`
			Role api.Role `json:"role"`
		}
		if json.Unmarshal(ev.Data, &m) == nil && m.Seq >= w.seq {
			w.seq, w.lastRole = m.Seq, m.Role
		}
	case "thread_closed":
		var c struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(ev.Data, &c) == nil && c.ThreadID == w.id {
			w.closed = true
		}
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// shown records that the messages up to seq were shown (from a history).
func (w *threadWatch) shown(msgs []api.Message) {
	if len(msgs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if last := msgs[len(msgs)-1]; last.Seq >= w.seq {
		w.seq, w.lastRole = last.Seq, last.Role
	}
}

// catchUpGrace bounds how long a client waits for the event stream to
// show a message the runtime already reports saved.
const catchUpGrace = 3 * time.Second

// caughtUp waits until the stream showed the message with Seq seq: the
// runtime saves a turn before it publishes it, so a status read can be
// ahead of the stream. It gives up after catchUpGrace (a message appended
// while no stream was open is never published) and reports whether the
// stream caught up.
func (w *threadWatch) caughtUp(ctx context.Context, seq int64) bool {
	limit := time.NewTimer(catchUpGrace)
	defer limit.Stop()
	for {
		w.mu.Lock()
		done, changed := w.seq >= seq, w.changed
		w.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-changed:
		case <-limit.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// role is the role of the last message shown.
func (w *threadWatch) role() api.Role {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastRole
}

// watchState is a snapshot of a threadWatch.
type watchState struct {
	state       string
	idles, errs int
	closed      bool
	changed     <-chan struct{} // closed at the next event
	running     bool
}

func (w *threadWatch) snapshot() watchState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return watchState{state: w.state, idles: w.idles, errs: w.errors, closed: w.closed, changed: w.changed,
		running: w.state == "running"}
}

// followedThread is a thread whose events a follower prints.
type followedThread struct {
	id    string
	tr    *transcript
	watch *threadWatch
	done  chan struct{} // closed when its stream is no longer read
	// depth is 0 for the root, 1 for its children, and so on.
	depth int
}

// follower prints the events of a thread tree: the thread a client talks
// in and, as they are spawned, its child threads (each event stream opened
// on its thread_spawned event), each with its own transcript prefixed with
// the child's short id. All output is written with mu held.
type follower struct {
	ctx    context.Context
	api    API
	mu     *sync.Mutex
	asks   *userAsks
	stderr io.Writer
	// after, when set, is called with mu held after each event is shown.
	after func(t *followedThread, ev Event)

	wg      sync.WaitGroup
	tmu     sync.Mutex
	threads map[string]*followedThread // followed, the root included
	known   map[string]bool            // threads followed or deliberately not
	capped  bool                       // maxFollowed was reached

	// holding keeps error events in held instead of showing them, while
	// a move runs (holdErrors); both are guarded by mu.
	holding bool
	held    []heldEvent
}

func newFollower(ctx context.Context, api API, mu *sync.Mutex, stderr io.Writer) *follower {
	return &follower{ctx: ctx, api: api, mu: mu, asks: &userAsks{}, stderr: stderr,
		threads: map[string]*followedThread{}, known: map[string]bool{}}
}

// root registers the thread the client talks in; its stream is read by
// the caller, which passes each event to handle.
func (f *follower) root(id string, tr *transcript) *followedThread {
	t := &followedThread{id: id, tr: tr, watch: newThreadWatch(id), done: make(chan struct{})}
	tr.self = id
	f.tmu.Lock()
	f.threads[id], f.known[id] = t, true
	f.tmu.Unlock()
	return t
}

// handle shows one event of thread t and follows the children it starts.
func (f *follower) handle(t *followedThread, ev Event) {
	if ev.Type == "thread_closed" {
		// A child closed: let its own stream finish printing first, so
		// that its lines come before the parent's part of the story.
		var c struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(ev.Data, &c) == nil && c.ThreadID != t.id {
			if k := f.followed(c.ThreadID); k != nil {
				timer := time.NewTimer(childCatchUp)
				select {
				case <-k.done:
				case <-timer.C:
				case <-f.ctx.Done():
				}
				timer.Stop()
			}
		}
	}
	f.mu.Lock()
	if ev.Type == "error" && f.holding {
		f.held = append(f.held, heldEvent{t, ev})
	} else {
		t.tr.event(ev)
	}
	f.mu.Unlock()
	f.asks.note(t.id, ev)
	t.watch.note(ev)
	if ev.Type == "thread_spawned" {
		var s struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(ev.Data, &s) == nil && s.ThreadID != "" {
			f.follow(s.ThreadID, t.tr)
		}
	}
	if f.after != nil {
		f.mu.Lock()
		f.after(t, ev)
		f.mu.Unlock()
	}
}

// markKnown records threads the client deliberately does not follow (the
// closed children of a resumed thread).
func (f *follower) markKnown(ids ...string) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	for _, id := range ids {
		f.known[id] = true
	}
}

// follow starts printing the events of child thread id, under parent's
// transcript. A thread is followed once.
func (f *follower) follow(id string, parent *transcript) {
	f.tmu.Lock()
	if _, ok := f.threads[id]; ok {
		f.tmu.Unlock()
		return
	}
	f.known[id] = true
	if len(f.threads) > maxFollowed {
		first := !f.capped
		f.capped = true
		f.tmu.Unlock()
		if first {
			f.mu.Lock()
			parent.endLine()
			fmt.Fprintf(f.stderr, "rap chat: following %d child threads already; later ones are not shown (list them with /threads)\n", maxFollowed)
			f.mu.Unlock()
		}
		return
	}
	t := &followedThread{id: id, tr: parent.forChild(id), watch: newThreadWatch(id), done: make(chan struct{})}
	if p, ok := f.threads[parent.self]; ok {
		t.depth = p.depth + 1
	} else {
		t.depth = 1
	}
	f.threads[id] = t
	f.tmu.Unlock()
	// What the child did so far is shown now, before the caller goes on
	// with the parent's events (the child may well have finished already);
	// the rest is shown as it happens.
	ctx, cancel := context.WithCancel(f.ctx)
	events := f.catchUp(ctx, t)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer close(t.done)
		defer cancel()
		if t.watch.snapshot().closed {
			return // closed before it was opened: its history said it all
		}
		for ev := range events {
			f.handle(t, ev)
			if t.watch.snapshot().closed {
				return
			}
		}
	}()
}

// catchUp opens a child thread's event stream, then shows what the child
// did before it was opened (the stream is live only) from its history,
// and follows the children it already started. It returns the stream, or
// a closed channel when the child cannot be followed.
func (f *follower) catchUp(ctx context.Context, t *followedThread) <-chan Event {
	events, _, err := f.api.Events(ctx, t.id)
	if err != nil {
		if ctx.Err() == nil {
			f.mu.Lock()
			t.tr.endLine()
			fmt.Fprintf(f.stderr, "rap chat: cannot follow child thread %s: %v\n", t.id, err)
			f.mu.Unlock()
		}
		ch := make(chan Event)
		close(ch)
		return ch
	}
	// The state first: when it says closed, the history read after it is
	// complete.
	st, serr := f.api.Status(ctx, t.id)
	msgs, compactions, herr := historyOf(ctx, f.api, t.id)
	if herr == nil {
		f.mu.Lock()
		t.tr.expectCompactions(compactions)
		t.tr.history(msgs)
		f.mu.Unlock()
		t.watch.shown(msgs)
	}
	if serr == nil {
		// Its open choices now, so that the next line can answer them.
		for _, ev := range st.choiceEvents() {
			f.handle(t, ev)
		}
		for _, k := range st.Children {
			f.follow(k, t.tr)
		}
		if st.Status == string(api.ThreadStatusClosed) {
			t.watch.note(Event{Type: "thread_closed", Data: mustJSON(map[string]string{"thread_id": t.id})})
		}
	}
	return events
}

// followed returns the followed thread id, or nil.
func (f *follower) followed(id string) *followedThread {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	return f.threads[id]
}

// waitQuiet waits until every followed thread is quiet: not running,
// nothing queued, no pending call unless the user is asked something, and
// every child it started is followed (or deliberately not). A thread that
// reported an error since errsBefore (the root) or at all (a child) and is
// not running counts as quiet: its input stays queued (RAP RT-4).
func (f *follower) waitQuiet(ctx context.Context, root *followedThread, errsBefore int, wait time.Duration) error {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		// Each poll is bounded: a request to a runtime that stops while
		// it answers must not hold the wait past the runtime's return.
		pollCtx, cancel := context.WithTimeout(ctx, quietPollTimeout)
		busy, err := f.busyThreads(pollCtx, root, errsBefore)
		cancel()
		switch {
		case unreachable(ctx, err):
			// The runtime restarts: ask again at the next poll.
			busy = []string{"the runtime is not reachable (" + err.Error() + ")"}
		case err != nil:
			return err
		case len(busy) == 0:
			return nil
		}
		select {
		case <-root.watch.snapshot().changed:
		case <-time.After(quietPoll):
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("gave up waiting after %v: %s; their results will appear with 'rap chat --thread %s'", wait, strings.Join(busy, "; "), root.id)
		}
	}
}

// busyThreads describes the followed threads that are not quiet.
func (f *follower) busyThreads(ctx context.Context, root *followedThread, errsBefore int) ([]string, error) {
	f.tmu.Lock()
	list := make([]*followedThread, 0, len(f.threads))
	for _, t := range f.threads {
		list = append(list, t)
	}
	f.tmu.Unlock()
	// Children before their parents, the root last: a child
	// closes and enqueues its report in its parent's inbox in one
	// transaction, so a child seen closed here has its report seen by
	// the parent's later status read (queued, or answered in a newer
	// turn). Checked the other way round, a child closing between the
	// two reads was seen closed while its parent was read as quiet, and
	// a piped chat ended before the parent answered the report.
	sort.Slice(list, func(i, j int) bool {
		if list[i] == root || list[j] == root {
			return list[j] == root && list[i] != root
		}
		if list[i].depth != list[j].depth {
			return list[i].depth > list[j].depth
		}
		return list[i].id < list[j].id
	})
	checked := make(map[string]bool, len(list))
	for _, t := range list {
		checked[t.id] = true
	}
	open, _ := f.asks.count()
	var busy []string
	for _, t := range list {
		ws := t.watch.snapshot()
		if ws.closed {
			continue
		}
		if t != root {
			select {
			case <-t.done:
				continue // its stream ended
			default:
			}
		}
		eb := 0
		if t == root {
			eb = errsBefore
		}
		name := "thread " + t.id
		if t != root {
			name = "child thread " + shortID(t.id)
		}
		switch {
		case ws.errs > eb && !ws.running:
			continue
		case ws.running:
			busy = append(busy, name+" is running")
			continue
		}
		st, err := f.api.Status(ctx, t.id)
		if err != nil {
			if t != root && StatusOf(err) == http.StatusNotFound {
				continue
			}
			return nil, err
		}
		if st.Status == string(api.ThreadStatusClosed) {
			continue
		}
		// The runtime says where the thread, its children included,
		// stands: settled, it is quiet once the stream showed what was
		// saved (an older runtime sends no state: inferred below).
		state := api.ThreadState(st.State)
		if state.Settled() || state == api.StateWaitingUser && open > 0 {
			t.watch.caughtUp(ctx, st.LastSeq)
			continue
		}
		before := len(busy)
		switch {
		case st.Queued > 0:
			busy = append(busy, fmt.Sprintf("%s has %s", name, plural(st.Queued, "queued input")))
		case len(st.PendingCalls) > 0 && open == 0:
			names := make([]string, 0, len(st.PendingCalls))
			for _, c := range st.PendingCalls {
				names = append(names, c.ToolName)
			}
			sort.Strings(names)
			busy = append(busy, fmt.Sprintf("%s has %s still pending (%s)", name, plural(len(names), "tool call"), strings.Join(names, ", ")))
		case len(st.activeSubscriptions()) > 0 && open == 0:
			// A subscription still produces events, each of which may
			// wake the thread or start a child.
			subs := st.activeSubscriptions()
			sort.Strings(subs)
			busy = append(busy, fmt.Sprintf("%s has %s (%s)", name, plural(len(subs), "active subscription"), strings.Join(subs, ", ")))
		default:
			// The runtime publishes a turn after saving it: let the
			// stream show what the status says was saved.
			if t.watch.caughtUp(ctx, st.LastSeq) {
				// A thread whose last message is a tool result or a user
				// message is about to answer it (its next slice may not
				// have started yet).
				if r := t.watch.role(); r == api.RoleTool || r == api.RoleUser {
					busy = append(busy, name+" has not answered its last input yet")
					continue
				}
			}
			for _, k := range st.Children {
				f.tmu.Lock()
				known := f.known[k] || f.capped
				// A child followed since this round began is checked in
				// the next one (its event may be about to start a turn).
				_, followed := f.threads[k]
				f.tmu.Unlock()
				if !known || followed && !checked[k] {
					busy = append(busy, name+" started child thread "+shortID(k)+", not followed yet")
					break
				}
			}
		}
		if state != "" && len(busy) == before {
			busy = append(busy, name+" is "+stateWords(state))
		}
	}
	return busy, nil
}

// stateWords says a thread state in words.
func stateWords(s api.ThreadState) string {
	switch s {
	case api.StateWaitingChildren:
		return "waiting for its child threads"
	case api.StateWaitingTools:
		return "waiting for tools"
	case api.StateWaitingUser:
		return "waiting for an answer"
	case api.StateWaitingTimer:
		return "asleep until its timer"
	case api.StateMoving:
		return "moving to another runtime"
	}
	return string(s)
}
