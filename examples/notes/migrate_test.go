package notes_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/notes"
	"github.com/gorap/gorap/raptest"
)

// migrate calls /migrate on from, moving session to to, and returns the
// StatusError it answered, or nil.
func migrate(t *testing.T, ctx context.Context, rt *raptest.Runtime, from, session, to string) *raptest.StatusError {
	t.Helper()
	err := rt.Migrate(ctx, from, session, to)
	if err == nil {
		return nil
	}
	var se *raptest.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("Migrate: %v", err)
	}
	return se
}

// RAP MI-1: /migrate answers 200 once the destination holds the notes,
// and the source no longer has them.
func TestMigrateMovesTheNotes(t *testing.T) {
	src, dst := serve(t, "peer-secret"), serve(t, "peer-secret")
	ctx, rt := runtime(t)
	add(t, ctx, rt, src.url, "root", "first")
	add(t, ctx, rt, src.url, "root", "second")
	add(t, ctx, rt, src.url, "other", "stays")
	if se := migrate(t, ctx, rt, src.url, "root", dst.url+"/"); se != nil {
		t.Fatal(se)
	}
	if got := list(t, ctx, rt, dst.url, "root"); got != "first\nsecond" {
		t.Errorf("the destination lists %q", got)
	}
	if got := list(t, ctx, rt, src.url, "root"); got != "no notes yet" {
		t.Errorf("the source still lists %q", got)
	}
	if got := list(t, ctx, rt, src.url, "other"); got != "stays" {
		t.Errorf("another session at the source lists %q", got)
	}
	if n := len(notesFiles(t, src.dir)); n != 1 {
		t.Errorf("%d files left at the source, want the other session's only", n)
	}
	// A session without notes has nothing to move.
	if se := migrate(t, ctx, rt, src.url, "empty", dst.url); se != nil {
		t.Errorf("moving a session without notes: %v", se)
	}
}

// RAP MI-1: when the destination cannot be reached, /migrate answers an
// error status with the reason, and the source keeps the notes.
func TestMigrateToAServerThatIsDown(t *testing.T) {
	src, dst := serve(t, "peer-secret"), serve(t, "peer-secret")
	ctx, rt := runtime(t)
	add(t, ctx, rt, src.url, "root", "precious")
	dst.hs.Close()
	se := migrate(t, ctx, rt, src.url, "root", dst.url)
	if se == nil || se.Status != http.StatusInternalServerError || !strings.Contains(se.Body, "sending the notes to") {
		t.Fatalf("migrating to a stopped server: %v, want a 500 saying the notes could not be sent", se)
	}
	if got := list(t, ctx, rt, src.url, "root"); got != "precious" {
		t.Errorf("the source lists %q after the failure", got)
	}
	// Not a notes server at all: 404, named.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	se = migrate(t, ctx, rt, src.url, "root", other.URL)
	if se == nil || !strings.Contains(se.Body, "404") || !strings.Contains(se.Body, "base URL of a notes server") {
		t.Errorf("migrating to a server that is not a notes server: %v", se)
	}
	if got := list(t, ctx, rt, src.url, "root"); got != "precious" {
		t.Errorf("the source lists %q after the failure", got)
	}
}

// The two servers must share the peer token: a different one, or none on
// either side, is refused and the notes stay.
func TestMigrateNeedsTheSamePeerToken(t *testing.T) {
	ctx, rt := runtime(t)
	src := serve(t, "peer-secret")
	add(t, ctx, rt, src.url, "root", "precious")
	for _, c := range []struct {
		name, dstToken, want string
	}{
		{"a different token", "another-secret", "different peer tokens"},
		{"no token at the destination", "", "accepts no imports"},
	} {
		dst := serve(t, c.dstToken)
		se := migrate(t, ctx, rt, src.url, "root", dst.url)
		if se == nil || se.Status != http.StatusInternalServerError || !strings.Contains(se.Body, "403") || !strings.Contains(se.Body, c.want) {
			t.Errorf("%s: %v, want a 500 quoting the destination's 403 (%q)", c.name, se, c.want)
		}
		if got := list(t, ctx, rt, dst.url, "root"); got != "no notes yet" {
			t.Errorf("%s: the destination lists %q", c.name, got)
		}
	}
	if got := list(t, ctx, rt, src.url, "root"); got != "precious" {
		t.Errorf("the source lists %q after the refusals", got)
	}

	tokenless, dst := serve(t, ""), serve(t, "peer-secret")
	add(t, ctx, rt, tokenless.url, "root", "kept")
	se := migrate(t, ctx, rt, tokenless.url, "root", dst.url)
	if se == nil || !strings.Contains(se.Body, "has no peer token") || !strings.Contains(se.Body, "--peer-token") {
		t.Errorf("a source without a peer token: %v, want an error saying to set one", se)
	}
	if got := list(t, ctx, rt, tokenless.url, "root"); got != "kept" {
		t.Errorf("the tokenless source lists %q", got)
	}
}

// A retried import of the same notes succeeds again; an import for a
// session that holds other notes at the destination is refused (409),
// never merged.
func TestReimport(t *testing.T) {
	src, dst := serve(t, "peer-secret"), serve(t, "peer-secret")
	ctx, rt := runtime(t)
	add(t, ctx, rt, src.url, "root", "one")
	add(t, ctx, rt, src.url, "root", "two")
	if se := migrate(t, ctx, rt, src.url, "root", dst.url); se != nil {
		t.Fatal(se)
	}
	// As if the source had failed to remove its copy: the same notes again.
	add(t, ctx, rt, src.url, "root", "one")
	add(t, ctx, rt, src.url, "root", "two")
	if se := migrate(t, ctx, rt, src.url, "root", dst.url); se != nil {
		t.Fatalf("re-importing identical notes: %v", se)
	}
	if got := list(t, ctx, rt, src.url, "root"); got != "no notes yet" {
		t.Errorf("the source lists %q after the retried move", got)
	}
	add(t, ctx, rt, src.url, "root", "something else")
	se := migrate(t, ctx, rt, src.url, "root", dst.url)
	if se == nil || !strings.Contains(se.Body, "409") || !strings.Contains(se.Body, "never merge") {
		t.Fatalf("importing different notes: %v, want the destination's 409", se)
	}
	if got := list(t, ctx, rt, dst.url, "root"); got != "one\ntwo" {
		t.Errorf("the destination lists %q, want its own notes untouched", got)
	}
	if got := list(t, ctx, rt, src.url, "root"); got != "something else" {
		t.Errorf("the source lists %q, want its notes kept", got)
	}
}

// A destination_url naming the source itself would have it accept its own
// notes and then delete them: it is refused and the notes stay.
func TestMigrateToItselfIsRefused(t *testing.T) {
	s := serve(t, "peer-secret")
	ctx, rt := runtime(t)
	add(t, ctx, rt, s.url, "root", "precious")
	se := migrate(t, ctx, rt, s.url, "root", s.url)
	if se == nil || !strings.Contains(se.Body, "409") || !strings.Contains(se.Body, "this very notes server") {
		t.Fatalf("migrating to itself: %v, want a refusal", se)
	}
	if got := list(t, ctx, rt, s.url, "root"); got != "precious" {
		t.Errorf("lists %q after migrating to itself", got)
	}
}

func TestMigrateRefusesAnUnusableSessionID(t *testing.T) {
	src, dst := serve(t, "peer-secret"), serve(t, "peer-secret")
	ctx, rt := runtime(t)
	for _, id := range []string{"a\x00b", strings.Repeat("x", notes.MaxSessionIDBytes+1)} {
		se := migrate(t, ctx, rt, src.url, id, dst.url)
		if se == nil || se.Status != http.StatusInternalServerError || !strings.Contains(se.Body, "session id") {
			t.Errorf("session id %.20q: %v, want a 500 about the session id", id, se)
		}
	}
}

// signed returns an import request to url signed with token at t.
func signed(t *testing.T, url, token string, at time.Time, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+notes.ImportPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	ts := at.Unix()
	m := hmac.New(sha256.New, []byte(token))
	fmt.Fprintf(m, "notes-import\n%d\n%s\n", ts, "elsewhere")
	m.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(notes.SourceHeader, "elsewhere")
	req.Header.Set(notes.SignatureHeader, fmt.Sprintf("t=%d,sig=%s", ts, hex.EncodeToString(m.Sum(nil))))
	return req
}

func status(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// The import route accepts only signed, fresh, bounded, well-formed
// imports.
func TestImportRoute(t *testing.T) {
	s := serve(t, "peer-secret")
	ctx, rt := runtime(t)
	good := []byte(`{"session_id":"root","notes":["hello"]}`)
	now := time.Now()

	unsigned := signed(t, s.url, "peer-secret", now, good)
	unsigned.Header.Del(notes.SignatureHeader)
	stale := signed(t, s.url, "peer-secret", now.Add(-notes.MaxClockSkew-time.Minute), good)
	tampered := signed(t, s.url, "peer-secret", now, good)
	tampered.Header.Set(notes.SourceHeader, "someone")
	wrongType := signed(t, s.url, "peer-secret", now, good)
	wrongType.Header.Set("Content-Type", "text/plain")
	get, _ := http.NewRequest(http.MethodGet, s.url+notes.ImportPath, nil)
	huge := append(append([]byte(`{"session_id":"root","notes":["`), bytes.Repeat([]byte("a"), notes.MaxImportBytes)...), `"]}`...)

	for _, c := range []struct {
		name string
		req  *http.Request
		want int
	}{
		{"unsigned", unsigned, http.StatusForbidden},
		{"signed by another key", signed(t, s.url, "guess", now, good), http.StatusForbidden},
		{"stale", stale, http.StatusForbidden},
		{"another source than signed", tampered, http.StatusForbidden},
		{"not JSON", wrongType, http.StatusUnsupportedMediaType},
		{"GET", get, http.StatusMethodNotAllowed},
		{"too large", signed(t, s.url, "peer-secret", now, huge), http.StatusRequestEntityTooLarge},
		{"unknown member", signed(t, s.url, "peer-secret", now, []byte(`{"session_id":"root","notes":["a"],"x":1}`)), http.StatusBadRequest},
		{"member twice", signed(t, s.url, "peer-secret", now, []byte(`{"session_id":"root","session_id":"other","notes":["a"]}`)), http.StatusBadRequest},
		{"no notes", signed(t, s.url, "peer-secret", now, []byte(`{"session_id":"root","notes":[]}`)), http.StatusBadRequest},
		{"a note with a line break", signed(t, s.url, "peer-secret", now, []byte(`{"session_id":"root","notes":["a\nb"]}`)), http.StatusBadRequest},
		{"a bad session id", signed(t, s.url, "peer-secret", now, []byte(`{"session_id":"a\u0000b","notes":["a"]}`)), http.StatusBadRequest},
		{"trailing data", signed(t, s.url, "peer-secret", now, append(good, '}')), http.StatusBadRequest},
	} {
		if code, body := status(t, c.req); code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.want)
		}
	}
	if n := len(notesFiles(t, s.dir)); n != 0 {
		t.Fatalf("%d files after refused imports", n)
	}
	if code, body := status(t, signed(t, s.url, "peer-secret", now, good)); code != http.StatusOK {
		t.Fatalf("a good import: %d %s", code, body)
	}
	if got := list(t, ctx, rt, s.url, "root"); got != "hello" {
		t.Errorf("after the import the session lists %q", got)
	}
}
