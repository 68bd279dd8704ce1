package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/archive"
	"github.com/gorap/gorap/runtime/store"
)

// A derived title is the first line of the first message that has text,
// its white space runs one space, and when longer than 60 characters it
// is cut on a word boundary (unless that loses more than half) and ends
// with an ellipsis, 60 characters at most.
func TestDerivedTitle(t *testing.T) {
	long := "Please review the deployment plan for the payments service before Friday"
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"Hello there", "Hello there"},
		{"\n\n  What time is it\tin Tokyo?  \nsecond line", "What time is it in Tokyo?"},
		{long, "Please review the deployment plan for the payments service…"},
		{strings.Repeat("x", 80), strings.Repeat("x", 59) + "…"},
		{"Short words then " + strings.Repeat("y", 70), "Short words then " + strings.Repeat("y", 42) + "…"},
		{strings.Repeat("é", 59) + " end", strings.Repeat("é", 59) + "…"},
		{"Ends with a comma, right at the cut here, so it is trimmed, yes indeed", "Ends with a comma, right at the cut here, so it is trimmed…"},
		{"bell\x07 in it", "bell in it"},
	} {
		got := derivedTitle(c.in)
		if got != c.want {
			t.Errorf("derivedTitle(%q) = %q, want %q", c.in, got, c.want)
		}
		if n := utf8.RuneCountInString(got); n > derivedTitleChars {
			t.Errorf("derivedTitle(%q) has %d characters, more than %d", c.in, n, derivedTitleChars)
		}
	}
}

// A title a person gives is trimmed and its white space runs are one
// space; one over api.MaxTitleChars characters, with a control character
// or not UTF-8 is refused with an error that says what is wrong.
func TestCheckTitle(t *testing.T) {
	for in, want := range map[string]string{
		"  Weekly report ":                     "Weekly report",
		"two\nlines\tand  space":               "two lines and space",
		"":                                     "",
		strings.Repeat("é", api.MaxTitleChars): strings.Repeat("é", api.MaxTitleChars),
	} {
		if got, err := checkTitle(in); err != nil || got != want {
			t.Errorf("checkTitle(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, says := range map[string]string{
		strings.Repeat("a", api.MaxTitleChars+1): "has 201 characters; the limit is 200",
		"nul\x00here":                            "control character U+0000",
		"bad \xff":                               "not valid UTF-8",
	} {
		if _, err := checkTitle(in); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("checkTitle(%q) = %v; want an error saying %q", in, err, says)
		}
	}
	if archive.MaxTitleChars != api.MaxTitleChars {
		t.Errorf("the archive allows titles of %d characters, the client API %d", archive.MaxTitleChars, api.MaxTitleChars)
	}
}

// patch sends PATCH /v1/threads/{id} and returns the status and body.
func patch(t *testing.T, base, id, body string) (int, string) {
	t.Helper()
	return do(t, "PATCH", base+"/v1/threads/"+url.PathEscape(id), body)
}

// listIDs lists the threads q selects (every page) and returns their ids
// and titles.
func listIDs(t *testing.T, base string, q url.Values) (ids []string, titles map[string]string) {
	t.Helper()
	titles = map[string]string{}
	q.Set("limit", "2") // more than one page
	for range 50 {
		status, body := do(t, "GET", base+"/v1/threads?"+q.Encode(), "")
		if status != http.StatusOK {
			t.Fatalf("GET /v1/threads?%s: %d %s", q.Encode(), status, body)
		}
		var page api.ThreadPage
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		for _, th := range page.Threads {
			ids = append(ids, th.ID)
			titles[th.ID] = th.Title
		}
		if page.NextCursor == "" {
			return ids, titles
		}
		q.Set("cursor", page.NextCursor)
	}
	t.Fatal("paging did not end")
	return nil, nil
}

// A session's title comes from its first user message once posted (a
// thread_updated event says so), a rename replaces it and an empty one
// brings the derived one back; the list and the thread's state show it,
// and it survives a restart. PATCH refuses a child thread, an unknown
// member, a body that changes nothing and a title over the limit, each
// with 400 and a message naming what is wrong.
// On SQLite and on PostgreSQL.
func TestSessionTitles(t *testing.T) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) { testSessionTitles(t, pg) })
	}
}

func testSessionTitles(t *testing.T, pg bool) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}, postgres: pg})
	base := e.srv.URL
	id := e.newThread()
	events, cancel := e.rt.Subscribe(id)
	defer cancel()
	if _, titles := listIDs(t, base, url.Values{}); titles[id] != "" {
		t.Errorf("a session without a message is listed with title %q", titles[id])
	}
	e.post(id, "  Plan the launch of the new website\nwith details")
	updated := waitEvent(t, events, api.EventThreadUpdated)
	var th api.Thread
	if err := json.Unmarshal(updated.Data, &th); err != nil || th.ID != id || th.Title != "Plan the launch of the new website" {
		t.Errorf("thread_updated after the first message: %s (%v); want the derived title", updated.Data, err)
	}
	e.post(id, "A second message changes nothing")
	e.idle(id)
	info, err := e.rt.ThreadInfo(t.Context(), id)
	if err != nil || info.Title != "Plan the launch of the new website" {
		t.Errorf("thread state title %q (%v) after a second message; want the first message's", info.Title, err)
	}

	status, body := patch(t, base, id, `{"title":"  Launch   plan "}`)
	if status != http.StatusOK || !strings.Contains(body, `"title":"Launch plan"`) {
		t.Errorf("rename: %d %s; want 200 with the new title", status, body)
	}
	updated = waitEvent(t, events, api.EventThreadUpdated)
	if !bytes.Contains(updated.Data, []byte(`"title":"Launch plan"`)) {
		t.Errorf("thread_updated after the rename: %s", updated.Data)
	}
	e.restart()
	base = e.srv.URL
	if _, titles := listIDs(t, base, url.Values{}); titles[id] != "Launch plan" {
		t.Errorf("after a restart the list shows title %q, want the given one", titles[id])
	}
	if status, body := patch(t, base, id, `{"title":""}`); status != http.StatusOK || !strings.Contains(body, `"title":"Plan the launch of the new website"`) {
		t.Errorf("rename to \"\": %d %s; want the derived title back", status, body)
	}

	child := "child-of-" + id
	if err := e.rt.store.Update(t.Context(), func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: child, ParentID: id}) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, body, says string }{
		{id, `{"title":"` + strings.Repeat("a", api.MaxTitleChars+1) + `"}`, "the limit is 200"},
		{id, `{"name":"x"}`, `unknown field "name"`},
		{id, `{}`, "nothing to change"},
		{id, `{"title":"a","title":"b"}`, "more than once"},
		{child, `{"title":"x"}`, "child thread"},
		{child, `{"archived":true}`, "root thread " + id},
	} {
		status, body := patch(t, base, c.id, c.body)
		var er api.ErrorResponse
		if status != http.StatusBadRequest || json.Unmarshal([]byte(body), &er) != nil || !strings.Contains(er.Error, c.says) {
			t.Errorf("PATCH %s %s: %d %s; want 400 saying %q", c.id, c.body, status, body, c.says)
		}
	}
	if status, _ := patch(t, base, "no-such-thread", `{"title":"x"}`); status != http.StatusNotFound {
		t.Errorf("PATCH of an unknown thread: %d, want 404", status)
	}
	_, titles := listIDs(t, base, url.Values{})
	if titles[id] != "Plan the launch of the new website" || titles[child] != "" {
		t.Errorf("after the refused requests the list shows titles %q (session), %q (child)", titles[id], titles[child])
	}
}

// Archiving leaves a session (and its child threads) out of GET
// /v1/threads; archived=include lists it with the others, archived=only
// alone; unarchiving brings it back. user_id= and parent_id= list
// archived sessions' threads unless told otherwise, and a bad archived=
// value is refused with 400.
func TestArchiveSessions(t *testing.T) {
	e := newEnv(t, envOptions{})
	base := e.srv.URL
	var a, b string
	for _, id := range []*string{&a, &b} {
		var err error
		if *id, err = e.rt.CreateThreadFor(t.Context(), "ann"); err != nil {
			t.Fatal(err)
		}
	}
	err := e.rt.store.Update(t.Context(), func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: a + "-kid", ParentID: a})
	})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := e.rt.Subscribe(a)
	defer cancel()
	status, body := patch(t, base, a, `{"archived":true}`)
	if status != http.StatusOK || !strings.Contains(body, `"archived":true`) {
		t.Fatalf("archive: %d %s", status, body)
	}
	if ev := waitEvent(t, events, api.EventThreadUpdated); !bytes.Contains(ev.Data, []byte(`"archived":true`)) {
		t.Errorf("thread_updated after archiving: %s", ev.Data)
	}
	for q, want := range map[string][]string{
		"":                                     {b},
		"archived=exclude":                     {b},
		"archived=include":                     {a, b, a + "-kid"},
		"archived=only":                        {a, a + "-kid"},
		"parent_id=" + a:                       {a + "-kid"},
		"parent_id=" + a + "&archived=exclude": nil,
		"user_id=ann":                          {a, b, a + "-kid"},
		"user_id=ann&archived=only":            {a, a + "-kid"},
	} {
		vals, _ := url.ParseQuery(q)
		got, _ := listIDs(t, base, vals)
		if !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Errorf("GET /v1/threads?%s lists %v, want %v", q, got, want)
		}
	}
	if status, body := do(t, "GET", base+"/v1/threads?archived=yes", ""); status != http.StatusBadRequest || !strings.Contains(body, "exclude") {
		t.Errorf("archived=yes: %d %s; want 400 naming the values", status, body)
	}
	info, err := e.rt.ThreadInfo(t.Context(), a)
	if err != nil || !info.Archived {
		t.Errorf("the archived session's state says archived=%v (%v)", info.Archived, err)
	}
	e.restart()
	base = e.srv.URL
	if got, _ := listIDs(t, base, url.Values{}); !slices.Equal(got, []string{b}) {
		t.Errorf("after a restart the list is %v, want [%s]", got, b)
	}
	if status, body := patch(t, base, a, `{"archived":false}`); status != http.StatusOK || strings.Contains(body, `"archived"`) {
		t.Errorf("unarchive: %d %s", status, body)
	}
	if got, _ := listIDs(t, base, url.Values{}); !slices.Equal(got, []string{a, b, a + "-kid"}) {
		t.Errorf("after unarchiving the list is %v, want every thread", got)
	}
}

// q= finds the sessions whose title or first message holds every word,
// in any case, taking % and _ literally, with their child threads, page
// by page; with archived= it searches archived sessions too; a query
// over api.MaxSearchChars characters is refused.
// On SQLite and on PostgreSQL.
func TestSearchThreads(t *testing.T) {
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) { testSearchThreads(t, pg) })
	}
}

func testSearchThreads(t *testing.T, pg bool) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}, postgres: pg})
	base := e.srv.URL
	deploy, budget, report, empty := e.newThread(), e.newThread(), e.newThread(), e.newThread()
	e.post(deploy, "Deploy the API to STAGING")
	e.post(budget, "numbers for Q3")
	e.post(report, "write the weekly report")
	for _, id := range []string{deploy, budget, report} {
		e.idle(id)
	}
	if status, body := patch(t, base, budget, `{"title":"Budget 100% über plan"}`); status != http.StatusOK {
		t.Fatalf("rename: %d %s", status, body)
	}
	if status, body := patch(t, base, report, `{"archived":true}`); status != http.StatusOK {
		t.Fatalf("archive: %d %s", status, body)
	}
	kid := deploy + "-kid"
	if err := e.rt.store.Update(t.Context(), func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: kid, ParentID: deploy}) }); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string][]string{
		"q=staging":                    {deploy, kid},
		"q=api+deploy":                 {deploy, kid},
		"q=deploy+production":          nil,
		"q=ÜBER":                       {budget},
		"q=100%25":                     {budget},
		"q=Q3":                         {budget},
		"q=_":                          nil,
		"q=weekly":                     nil, // archived
		"q=weekly&archived=include":    {report},
		"q=%20%20&archived=exclude":    {deploy, budget, empty, kid},
		"q=report&archived=only":       {report},
		"q=deploy&parent_id=" + deploy: {kid},
	} {
		vals, _ := url.ParseQuery(q)
		got, _ := listIDs(t, base, vals)
		if !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Errorf("GET /v1/threads?%s lists %v, want %v", q, got, want)
		}
	}
	long := url.Values{"q": {strings.Repeat("ü", api.MaxSearchChars+1)}}
	if status, body := do(t, "GET", base+"/v1/threads?"+long.Encode(), ""); status != http.StatusBadRequest || !strings.Contains(body, "the limit is 200") {
		t.Errorf("a query too long: %d %s; want 400 naming the limit", status, body)
	}
}

// A caller bound to a user renames and archives only that user's
// sessions (another's answer 404 as unknown ones do), and lists, searches
// and filters only those.
func TestTitlesAreTheUsersOwn(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	h := e.rt.Handler()
	alice, bob := &Caller{UserID: "alice"}, &Caller{UserID: "bob"}
	a, err := e.rt.CreateThreadFor(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.rt.CreateThreadFor(t.Context(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a, b} {
		e.post(id, "shared words")
	}
	if status, _ := callAs(t, h, alice, "PATCH", "/v1/threads/"+b, `{"title":"mine now"}`); status != http.StatusNotFound {
		t.Errorf("alice renaming bob's session: %d, want 404", status)
	}
	if status, _ := callAs(t, h, alice, "PATCH", "/v1/threads/"+b, `{"archived":true}`); status != http.StatusNotFound {
		t.Errorf("alice archiving bob's session: %d, want 404", status)
	}
	if status, body := callAs(t, h, alice, "PATCH", "/v1/threads/"+a, `{"title":"Alice's","archived":true}`); status != http.StatusOK {
		t.Errorf("alice renaming and archiving her session: %d %s", status, body)
	}
	info, err := e.rt.ThreadInfo(t.Context(), b)
	if err != nil || info.Title != "shared words" || info.Archived {
		t.Errorf("bob's session after alice's attempts: title %q, archived %v (%v)", info.Title, info.Archived, err)
	}
	for _, c := range []struct {
		who   *Caller
		query string
		want  []string
	}{
		{alice, "?q=shared&archived=include", []string{a}},
		{alice, "?archived=only", []string{a}},
		{alice, "?q=shared", nil},
		{bob, "?q=shared&archived=include", []string{b}},
		{alice, "?user_id=bob&archived=include", nil},
	} {
		status, out := callAs(t, h, c.who, "GET", "/v1/threads"+c.query, "")
		var page api.ThreadPage
		if status != http.StatusOK || json.Unmarshal([]byte(out), &page) != nil {
			t.Fatalf("list as %s%s: %d %s", c.who.UserID, c.query, status, out)
		}
		var got []string
		for _, th := range page.Threads {
			got = append(got, th.ID)
		}
		if !slices.Equal(got, c.want) && len(got)+len(c.want) > 0 {
			t.Errorf("%s lists %s: %v, want %v", c.who.UserID, c.query, got, c.want)
		}
	}
}

// Exporting a session and importing it elsewhere keeps its title and
// archived flag, and the title derived from its first message.
func TestTitlesGoWithExport(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	named, derived := e.newThread(), e.newThread()
	e.post(named, "first of the named one")
	e.post(derived, "Derived from this message")
	e.idle(named)
	e.idle(derived)
	if _, err := e.rt.UpdateThread(t.Context(), named, api.UpdateThreadRequest{Title: new("Given title"), Archived: new(true)}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := e.rt.ExportSessions(t.Context(), &buf, []string{named, derived}); err != nil {
		t.Fatal(err)
	}
	other := newEnv(t, envOptions{})
	if _, err := other.rt.ImportSessions(t.Context(), &buf); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]api.Thread{named: {Title: "Given title", Archived: true}, derived: {Title: "Derived from this message"}} {
		info, err := other.rt.ThreadInfo(t.Context(), id)
		if err != nil || info.Title != want.Title || info.Archived != want.Archived {
			t.Errorf("imported session %s: title %q, archived %v (%v); want %q, %v", id, info.Title, info.Archived, err, want.Title, want.Archived)
		}
	}
	found, err := other.rt.FindThreads(context.Background(), api.ThreadQuery{Query: "derived"})
	if err != nil || len(found.Threads) != 1 || found.Threads[0].ID != derived {
		t.Errorf("a search in the importing runtime found %+v (%v), want the derived-title session", found.Threads, err)
	}
}
