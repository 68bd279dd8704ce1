package durable_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/gorap/gorap/rap"
)

// PendingFor lists one destination's messages in order,
// and a host whose name extends another's is not mistaken for it.
func TestPendingFor(t *testing.T) {
	ctx := context.Background()
	st := open(t, filepath.Join(t.TempDir(), "tool.db"))
	urls := []string{"http://a:1/cb", "http://a:10/cb", "http://a:1?x", "http://b:1/cb", "http://a:1/cb/2"}
	for i, u := range urls {
		m := msg(i)
		m.URL = u
		if err := st.Enqueue(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.PendingFor(ctx, "http://a:1", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var gotURLs []string
	for _, m := range got {
		gotURLs = append(gotURLs, m.URL)
	}
	if want := []string{"http://a:1/cb", "http://a:1?x", "http://a:1/cb/2"}; len(gotURLs) != 3 || gotURLs[0] != want[0] || gotURLs[1] != want[1] || gotURLs[2] != want[2] {
		t.Errorf("PendingFor = %q, want %q", gotURLs, want)
	}
	if after, _ := st.PendingFor(ctx, "http://a:1", got[0].Seq, 1); len(after) != 1 || after[0].URL != "http://a:1?x" {
		t.Errorf("PendingFor after the first, limit 1 = %+v", after)
	}
}

// A dead letter leaves the outbox with its status and
// reason, survives reopening, and can be retried (back at the end of the
// queue, attempts reset) or dropped.
func TestDeadLetters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tool.db")
	st := open(t, path)
	for i := range 3 {
		if err := st.Enqueue(ctx, msg(i)); err != nil {
			t.Fatal(err)
		}
	}
	_ = st.Attempted(ctx, "k000")
	if err := st.DeadLetter(ctx, "k000", 503, "too old"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeadLetter(ctx, "unknown", 404, "x"); err != nil {
		t.Errorf("DeadLetter of an unknown key: %v", err)
	}
	st.Close()
	st = open(t, path)
	dl, err := st.DeadLetters(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dl) != 1 || dl[0].Key != "k000" || dl[0].Status != 503 || dl[0].Reason != "too old" || dl[0].Attempts != 1 || dl[0].DeadAt.IsZero() {
		t.Fatalf("DeadLetters = %+v", dl)
	}
	if p, _ := st.Pending(ctx, 10); len(p) != 2 {
		t.Errorf("%d pending, want 2", len(p))
	}
	if err := st.RetryDeadLetter(ctx, "k000"); err != nil {
		t.Fatal(err)
	}
	p, _ := st.Pending(ctx, 10)
	if len(p) != 3 || p[2].Key != "k000" || p[2].Attempts != 0 {
		t.Errorf("after retry, pending %+v; want k000 last with no attempts", p)
	}
	if err := st.RetryDeadLetter(ctx, "k000"); !errors.Is(err, rap.ErrNoDeadLetter) {
		t.Errorf("retrying a pending message: %v, want ErrNoDeadLetter", err)
	}
	if n, err := st.PendingCount(ctx); err != nil || n != 3 {
		t.Errorf("PendingCount = %d, %v", n, err)
	}
}
