package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/notes"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
	"github.com/gorap/gorap/runtime/store"
)

// startNotes serves a notes tool server (its toolset needs migration)
// keeping its notes in dir.
func startNotes(t *testing.T, dir string) string {
	t.Helper()
	s, err := notes.New(&notes.Options{Dir: dir, PeerToken: "peer-secret-for-tests"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		s.Shutdown(context.Background())
	})
	return srv.URL
}

// moveTurns is the script both runtimes of a move run: the conversation
// continues at the destination where it left off.
var moveTurns = []scripted.Turn{
	{When: &scripted.When{LastResultContains: "job done"}, Text: "the job finished"},
	{When: &scripted.When{LastResultContains: "Woke up"}, Text: "rested"},
	{AfterUser: "start", Text: "on it", ToolCalls: []scripted.Call{
		call("add_note", `{"text":"remember the milk"}`),
		call("slow_job", `{}`),
		call("watch", `{}`),
		call(BuiltinSleep, `{"seconds": 4, "reason": "test"}`),
	}},
	{Text: "?", Repeat: true},
}

// postJSON posts body to url and returns the status and answer.
func postJSON(t *testing.T, url string, body any) (int, []byte, http.Header) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header
}

// RAP MI-1, MI-2: a session moves between two runtimes with its
// pending calls and timer: the tool server whose toolset needs migration moves its state
// to the destination's server of the same toolset (and is the only one
// told /close_thread afterwards); a pending call's result and a repeat of
// it, delivered to the source's old callback URL, reach the destination's
// history once; the pending sleep fires at the destination; the source
// answers for the session with 308 and where it went.
func TestSessionMovesBetweenRuntimes(t *testing.T) {
	t.Run("SQLite to SQLite", func(t *testing.T) { testSessionMoves(t, false) })
	t.Run("SQLite to PostgreSQL", func(t *testing.T) { testSessionMoves(t, true) })
}

func testSessionMoves(t *testing.T, pgDest bool) {
	notesA, notesB := t.TempDir(), t.TempDir()
	jobsA := newToolServer(t, "jobs", tool("slow_job"), tool("watch"))
	jobsB := newToolServer(t, "jobs", tool("slow_job"), tool("watch"))
	var closesAtJobsA, migratesAtJobsA atomic.Int32
	jobsA.onOther = func(r *http.Request, _ []byte) {
		switch r.URL.Path {
		case rap.CloseThreadPath:
			closesAtJobsA.Add(1)
		case rap.MigratePath:
			migratesAtJobsA.Add(1)
		}
	}
	a := newEnv(t, envOptions{turns: moveTurns, servers: []string{startNotes(t, notesA), jobsA.URL()}})
	var statusAtJobsB atomic.Int32
	jobsB.onOther = func(r *http.Request, _ []byte) {
		if r.URL.Path == rap.ToolCallStatusPath {
			statusAtJobsB.Add(1)
		}
	}
	b := newEnv(t, envOptions{turns: moveTurns, servers: []string{startNotes(t, notesB), jobsB.URL()},
		tweak: func(c *Config) { c.CallStatusAfter = 50 * time.Millisecond }, postgres: pgDest})
	th := a.newThread()
	a.post(th, "start")
	job, watch := jobsA.next(), jobsA.next()
	if job.Operation != "slow_job" {
		job, watch = watch, job
	}
	if status, body := callback(t, watch.CallbackURL, rap.ToolResult{GroupID: watch.GroupID, ID: watch.ID, Text: "watching", Subscription: true}); status != http.StatusOK {
		t.Fatalf("subscription confirmation: %d %s", status, body)
	}
	a.waitHistory(th, "the note's result and the subscription", func(h []store.Message) bool {
		return countResults(h, "noted") == 1 && countResults(h, "watching") == 1
	})
	a.idle(th)
	// An open user input of the job moves with the session.
	input := rap.UserInput{GroupID: job.GroupID, ID: job.ID, Prompt: "Which?", Fields: []rap.InputField{{Name: "n", Type: rap.InputString}},
		ResponseURL: jobsA.URL() + "/answer"}
	if status, body := callback(t, job.CallbackURL, input); status != http.StatusOK {
		t.Fatalf("user input: %d %s", status, body)
	}
	// A child thread, written while the source is stopped, moves too.
	child := th + "-child"
	a.stop()
	a.offline(func(tx store.Tx) error {
		last, err := tx.LastSeq(th)
		if err != nil {
			return err
		}
		if err := tx.CreateThread(store.Thread{ID: child, ParentID: th, InheritSeq: last}); err != nil {
			return err
		}
		_, err = tx.AppendMessages(child, []store.Message{{Role: store.RoleUser, Text: "a child's own message"}})
		return err
	})
	a.start()

	status, body, _ := postJSON(t, a.srv.URL+"/v1/threads/"+th+"/migrate", api.MoveRequest{To: b.srv.URL})
	if status != http.StatusOK {
		t.Fatalf("move: %d %s", status, body)
	}
	var moved api.MoveResponse
	json.Unmarshal(body, &moved)
	if moved.MovedTo != b.srv.URL || len(moved.Migrated) != 1 || moved.Migrated[0] != "notes" {
		t.Fatalf("move answer = %+v; want moved to %s with notes migrated", moved, b.srv.URL)
	}
	// The notes moved from A's notes server to B's.
	h := sha256.Sum256([]byte(th))
	file := hex.EncodeToString(h[:]) + ".json"
	if _, err := os.Stat(filepath.Join(notesB, file)); err != nil {
		t.Errorf("the destination's notes server has no notes of the session: %v", err)
	}
	if _, err := os.Stat(filepath.Join(notesA, file)); !os.IsNotExist(err) {
		t.Errorf("the source's notes server still has the session's notes: %v", err)
	}
	if ins, err := b.rt.PendingInputs(context.Background(), th); err != nil || len(ins) != 1 || ins[0].CallID != job.ID || ins[0].Fields[0].Name != "n" {
		t.Errorf("the destination's open user inputs = %+v, %v; want the job's", ins, err)
	}
	// The history moved.
	hist := b.history(th)
	if !hasText(hist, store.RoleUser, "start") || countResults(hist, "noted") != 1 {
		t.Fatalf("the destination's history lacks what came before the move:\n%s", dump(hist))
	}
	// The destination does not ask its own jobs server about the call
	// another server took.
	deadline := time.Now().Add(waitFor)
	for statusAtJobsB.Load() == 0 && !strings.Contains(b.logs.String(), "call status not asked: the call was taken by another tool server") {
		if time.Now().After(deadline) {
			t.Fatal("the destination never considered the moved call's status")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := statusAtJobsB.Load(); n != 0 {
		t.Errorf("the destination asked its own jobs server %d times about a call another server took", n)
	}
	ch := b.history(child)
	if len(ch) == 0 || !hasText(ch, store.RoleUser, "a child's own message") || !hasText(ch, store.RoleUser, "start") {
		t.Errorf("the child thread at the destination lacks its own or its inherited history:\n%s", dump(ch))
	}
	// An event of the active subscription, sent twice to A's callback
	// URL, reaches the destination once.
	for range 2 {
		if status, body := callback(t, watch.CallbackURL, rap.SubscriptionEvent{GroupID: watch.GroupID, ToolCallID: watch.ID, EventID: "e1", Text: "tick 1", Associative: true}); status != http.StatusOK {
			t.Fatalf("an event sent to the old address: %d %s", status, body)
		}
	}
	// The job's result goes to A's callback URL, twice (a tool retrying).
	reply(t, job, "job done")
	if status, body := callback(t, job.CallbackURL, rap.ToolResult{GroupID: job.GroupID, ID: job.ID, Text: "job done"}); status != http.StatusOK {
		t.Fatalf("a repeated result sent to the old address: %d %s", status, body)
	}
	hist = b.waitHistory(th, "the job's result and the sleep's end at the destination", func(h []store.Message) bool {
		return countResults(h, "job done") > 0 && countResults(h, "Woke up") > 0 && h[len(h)-1].Role == store.RoleAssistant
	})
	if n := countResults(hist, "job done"); n != 1 {
		t.Errorf("the job's result is %d times in the destination's history; want once:\n%s", n, dump(hist))
	}
	b.idle(th)
	if n := strings.Count(dump(b.history(th)), "tick 1"); n != 1 {
		t.Errorf("the subscription's event is %d times in the destination's history; want once:\n%s", n, dump(b.history(th)))
	}
	if n := countResults(b.history(th), "Woke up"); n != 1 {
		t.Errorf("the sleep woke the thread %d times at the destination; want once", n)
	}
	// The source answers for the session with where it went.
	req, _ := http.NewRequest(http.MethodGet, a.srv.URL+"/v1/threads/"+th, nil)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != b.srv.URL+"/v1/threads/"+th {
		t.Errorf("GET the moved session at the source: %d, Location %q; want 308 to the destination", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Following it reaches the session.
	resp, err = http.Get(a.srv.URL + "/v1/threads/" + th)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("following the redirect: %d; want the session at the destination", resp.StatusCode)
	}
	// The Go client says where the session went instead of following.
	ca, err := client.New(a.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ca.Thread(context.Background(), th)
	if to, moved := client.MovedTo(err); !errors.Is(err, client.ErrMoved) || !moved || to != b.srv.URL+"/v1/threads/"+th {
		t.Errorf("the client's answer for the moved session: %v; want ErrMoved with its address at the destination", err)
	}
	if migratesAtJobsA.Load() != 0 {
		t.Errorf("the source called /migrate on a tool server whose toolset does not say needsMigration (RAP MI-2 forbids it)")
	}
	if closesAtJobsA.Load() != 0 {
		t.Errorf("the source told a tool server without needsMigration /close_thread; it may still owe the session a result")
	}
	// The forwarding record survives a restart of the source.
	a.restart()
	resp, err = (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(a.srv.URL + "/v1/threads/" + th + "/messages")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPermanentRedirect {
		t.Errorf("after a restart of the source, the moved session's history: %d; want 308", resp.StatusCode)
	}
	if status, body := callback(t, job.CallbackURL, rap.ToolResult{GroupID: job.GroupID, ID: job.ID, Text: "job done"}); status != http.StatusOK {
		t.Errorf("a result sent to the old address after the source restarted: %d %s; want it forwarded (and found a duplicate there)", status, body)
	}
	b.idle(th)
	if n := countResults(b.history(th), "job done"); n != 1 {
		t.Errorf("after a third delivery the job's result is %d times at the destination; want once", n)
	}
	if strings.Contains(a.logs.String(), "peer-secret") {
		t.Errorf("a secret reached the source's log")
	}
}
