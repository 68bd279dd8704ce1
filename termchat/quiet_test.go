package termchat

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/gorap/gorap/runtime/api"
)

// statusAPI answers Status from a function; the other methods are not
// used by busyThreads.
type statusAPI struct {
	API
	status func(id string) *ThreadStatus
}

func (a statusAPI) Status(_ context.Context, id string) (*ThreadStatus, error) {
	return a.status(id), nil
}

// A piped chat ends only when the thread tree is quiet: a
// child thread that a subscription's last event started while the
// quiet check ran was followed but not checked, and the chat ended
// before the child handled the event (seen walking the README tour).
func TestBusyThreadsCountsAChildFollowedMeanwhile(t *testing.T) {
	var mu sync.Mutex
	f := newFollower(context.Background(), nil, &mu, io.Discard)
	root := f.root("root-thread", newTranscript(io.Discard, Display{}))
	root.watch.lastRole = api.RoleAssistant
	f.api = statusAPI{status: func(id string) *ThreadStatus {
		if id == "root-thread" {
			// The thread_spawned event is handled while the root's state
			// is read: the child is followed from now on.
			f.tmu.Lock()
			f.threads["child-thread"] = &followedThread{id: "child-thread", watch: newThreadWatch("child-thread"), done: make(chan struct{})}
			f.known["child-thread"] = true
			f.tmu.Unlock()
			return &ThreadStatus{Status: "active", Children: []string{"child-thread"}}
		}
		return &ThreadStatus{Status: "active", Queued: 1}
	}}
	busy, err := f.busyThreads(context.Background(), root, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(busy) == 0 || !strings.Contains(strings.Join(busy, "; "), "started child thread") {
		t.Errorf("busyThreads = %q; want the child followed meanwhile counted as busy", busy)
	}
}

// A piped chat ends only when the thread tree is quiet: the
// last tick's child closed with a report between the quiet check's read
// of the root (nothing queued yet) and its look at the child (closed),
// so neither was counted busy and the chat ended before the root
// answered the report. The runtime closes a child and enqueues its
// report in one transaction; here that commit happens right after the
// first status read, whichever thread it is of.
func TestBusyThreadsSeesAReportInFlightToTheParent(t *testing.T) {
	var mu sync.Mutex
	f := newFollower(context.Background(), nil, &mu, io.Discard)
	root := f.root("root-thread", newTranscript(io.Discard, Display{}))
	root.watch.lastRole = api.RoleAssistant
	child := &followedThread{id: "child-thread", watch: newThreadWatch("child-thread"), done: make(chan struct{}), depth: 1}
	f.threads[child.id], f.known[child.id] = child, true
	reads := 0
	f.api = statusAPI{status: func(id string) *ThreadStatus {
		reads++
		closed := reads > 1 // the child's close commits after the first read
		switch {
		case id == root.id && closed:
			return &ThreadStatus{Status: "active", Queued: 1, Children: []string{child.id}}
		case id == root.id:
			return &ThreadStatus{Status: "active", Children: []string{child.id}}
		case closed:
			return &ThreadStatus{Status: string(api.ThreadStatusClosed)}
		default:
			// Its turn is committing: its input is still queued.
			return &ThreadStatus{Status: "active", Queued: 1}
		}
	}}
	busy, err := f.busyThreads(context.Background(), root, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(busy) == 0 {
		t.Errorf("busyThreads = nil after %d status reads; want the child or the root (its report queued) counted as busy", reads)
	}
}

// A deeper thread is checked before its parent, the root last.
func TestBusyThreadsChecksChildrenBeforeParents(t *testing.T) {
	var mu sync.Mutex
	f := newFollower(context.Background(), nil, &mu, io.Discard)
	root := f.root("a-root", newTranscript(io.Discard, Display{}))
	root.watch.lastRole = api.RoleAssistant
	for _, k := range []struct {
		id    string
		depth int
	}{{"b-child", 1}, {"c-grandchild", 2}} {
		f.threads[k.id], f.known[k.id] = &followedThread{id: k.id, watch: newThreadWatch(k.id), done: make(chan struct{}), depth: k.depth}, true
	}
	var order []string
	f.api = statusAPI{status: func(id string) *ThreadStatus {
		order = append(order, id)
		return &ThreadStatus{Status: "active"}
	}}
	if _, err := f.busyThreads(context.Background(), root, 0); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(order, ","), "c-grandchild,b-child,a-root"; got != want {
		t.Errorf("status read order = %s; want %s", got, want)
	}
}
