package termchat

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// "/move URL" moves the chat's session to the runtime at URL: the chat
// says how to continue there and exits 0 without sending the lines after
// it, and shows no error for the source's stream ending. A chat resuming
// the session at the source then exits 1 saying where it went and the
// command to continue there; that command works.
func TestChatMoveSession(t *testing.T) {
	src := startTestRuntime(t, timeScript())
	dst := startTestRuntime(t, timeScript())
	out, errOut, err := runChatFor(t, Options{Server: src.URL}, "hello\n/move "+dst.URL+"\nnever sent\n")
	if err != nil {
		t.Fatalf("chat: %v (exit %d)\nstdout:\n%s\nstderr:\n%s", err, ExitCode(err), out, errOut)
	}
	threads, err := dst.Threads(context.Background())
	if err != nil || len(threads) != 1 {
		t.Fatalf("the destination's threads = %v, %v; want the moved session", threads, err)
	}
	id := threads[0].ID
	wantLines(t, out, "assistant: You said: hello", "moved to "+dst.URL+"; continue there: rap chat --server "+dst.URL+" --thread "+id)
	if strings.Contains(out, "never sent") || strings.Contains(out, "! error") {
		t.Errorf("after the move the chat sent a line, or showed an error:\n%s", out)
	}
	msgs, err := dst.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if countUser(msgs, "hello") != 1 || countUser(msgs, "never sent") != 0 {
		t.Errorf("the destination's history: %d × hello, %d × never sent; want 1 and 0", countUser(msgs, "hello"), countUser(msgs, "never sent"))
	}

	_, _, err = runChatFor(t, Options{Server: src.URL, Thread: id}, "")
	want := "this session moved to " + dst.URL + "; continue there with: rap chat --server " + dst.URL + " --thread " + id + " (and that runtime's token)"
	if ExitCode(err) != ExitFailure || err.Error() != want {
		t.Errorf("resuming at the source: %v (exit %d); want exit 1 saying %q", err, ExitCode(err), want)
	}

	out, errOut, err = runChatFor(t, Options{Server: dst.URL, Thread: id}, "again\n")
	if err != nil {
		t.Fatalf("chat at the destination: %v\n%s", err, errOut)
	}
	wantLines(t, out, "you: hello", "assistant: You said: again")
}

// A move that fails leaves the session here: the chat says why, goes on
// with the next line, and exits 1 at the end because of it; /move without
// a destination says how it is used.
func TestChatFailedMoveGoesOn(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"the destination is out of disk"}`, http.StatusInternalServerError)
	}))
	t.Cleanup(refusing.Close)
	src := startTestRuntime(t, timeScript())
	out, errOut, err := runChatFor(t, Options{Server: src.URL}, "/move\n/move "+refusing.URL+"\nstill here?\n")
	if ExitCode(err) != ExitFailure || !strings.Contains(err.Error(), "refused 1") {
		t.Fatalf("chat: %v (exit %d); want exit 1 naming the failed move\nstderr:\n%s", err, ExitCode(err), errOut)
	}
	wantLines(t, errOut, "rap chat: /move URL_OR_REMOTE [TOKEN] moves this session", "rap chat: /move: the move failed and the session stays here", "out of disk")
	wantLines(t, out, "assistant: You said: still here?")
	threads, err := src.Threads(context.Background())
	if err != nil || len(threads) != 1 {
		t.Fatalf("the source's threads = %v, %v; want the session still here", threads, err)
	}
	if _, moved := src.MovedTo(threads[0].ID); moved {
		t.Error("the source says the session moved")
	}
}

// The line editor's history keeps a /move command without its token.
func TestHistoryDropsMoveToken(t *testing.T) {
	for in, want := range map[string]string{
		"/move https://b.example s3cret":  "/move https://b.example",
		"  /move west s3cret extra":       "/move west",
		"/move west":                      "/move west",
		"hello /move https://b.example x": "hello /move https://b.example x",
	} {
		if got := historyEntry(in); got != want {
			t.Errorf("historyEntry(%q) = %q; want %q", in, got, want)
		}
	}
}

// /help names /move, /usage and /compact, and an unknown command lists
// them.
func TestChatHelpNamesMove(t *testing.T) {
	src := startTestRuntime(t, timeScript())
	out, errOut, err := runChatFor(t, Options{Server: src.URL}, "/help\n/nope\n")
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut)
	}
	wantLines(t, out, "/move URL_OR_REMOTE [TOKEN]", "/usage (the tokens", "/compact (the model summarises")
	wantLines(t, errOut, "/threads, /usage, /compact, /move, /dismiss, /help and /quit")
}
