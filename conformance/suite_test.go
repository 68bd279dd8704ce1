package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func chk(id string, l Level) Check {
	return Check{ID: id, Level: l, Rule: "RAP TR-2", Title: "title of " + id, Fix: "fix " + id}
}

func TestSuiteOutcomes(t *testing.T) {
	var s Suite
	s.Name = "tool"
	s.Add(chk("a.pass", Must), func(t *T) { t.Logf("saw %d", 1) })
	s.Add(chk("a.fail", Must), func(t *T) { t.Failf("wrong %s", "thing"); panic("not reached") })
	s.Add(chk("a.skip", Should), func(t *T) { t.Skipf("not offered") })
	s.Add(chk("b.needs-pass", Must), func(t *T) { t.Requires("a.pass") })
	s.Add(chk("b.needs-fail", Must), func(t *T) { t.Requires("a.fail"); t.Failf("not reached") })
	s.Add(chk("b.panics", Should), func(t *T) { panic("boom") })
	s.Add(chk("b.slow", Should), func(t *T) { <-t.Context().Done() })
	rep := s.Run(context.Background(), RunOptions{Subject: "http://x", CheckTimeout: 200 * time.Millisecond})

	want := map[string]Status{
		"a.pass": Pass, "a.fail": Fail, "a.skip": Skip, "b.needs-pass": Pass,
		"b.needs-fail": Skip, "b.panics": Fail, "b.slow": Fail,
	}
	for id, st := range want {
		res, ok := rep.Result(id)
		if !ok || res.Status != st {
			t.Errorf("%s: got %v (%q), want %s", id, res.Status, res.Message, st)
		}
	}
	if res, _ := rep.Result("a.fail"); res.Message != "wrong thing" {
		t.Errorf("a.fail message = %q", res.Message)
	}
	if res, _ := rep.Result("a.pass"); res.Message != "saw 1" {
		t.Errorf("a.pass note = %q", res.Message)
	}
	if res, _ := rep.Result("b.needs-fail"); !strings.Contains(res.Message, "a.fail") {
		t.Errorf("a skip for a failed dependency names it: %q", res.Message)
	}
	if res, _ := rep.Result("b.slow"); !strings.Contains(res.Message, "did not finish") {
		t.Errorf("timeout message = %q", res.Message)
	}
	if !rep.Failed() {
		t.Error("a failed MUST makes the report fail")
	}
	if got := rep.Summary(); got != "2 passed, 3 failed (1 MUST, 2 SHOULD), 2 skipped" {
		t.Errorf("summary = %q", got)
	}
}

func TestOnlyFailedShouldsDoNotFail(t *testing.T) {
	var s Suite
	s.Add(chk("x", Should), func(t *T) { t.Failf("no") })
	s.Add(chk("y", Extension), func(t *T) { t.Failf("no") })
	if s.Run(context.Background(), RunOptions{}).Failed() {
		t.Error("failed SHOULD and extension checks do not make the implementation non-conforming")
	}
}

func TestOnlySelectsByIDPrefix(t *testing.T) {
	var s Suite
	ran := map[string]bool{}
	for _, id := range []string{"tool.ack", "tool.ack.time", "tool.ackx", "other"} {
		s.Add(chk(id, Must), func(t *T) { ran[t.Check().ID] = true })
	}
	rep := s.Run(context.Background(), RunOptions{Only: []string{"tool.ack"}})
	if !ran["tool.ack"] || !ran["tool.ack.time"] || ran["tool.ackx"] || ran["other"] {
		t.Errorf("ran %v", ran)
	}
	if res, _ := rep.Result("other"); res.Status != Skip {
		t.Errorf("unselected check: %v", res.Status)
	}
}

func TestAddRefusesDuplicateIDs(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("adding an ID twice panics")
		}
	}()
	var s Suite
	s.Add(chk("a", Must), func(*T) {})
	s.Add(chk("a", Must), func(*T) {})
}

func TestExchangesAreKeptWithSecretsRedacted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Set-Cookie", "session=topsecret")
		w.WriteHeader(503)
		io.WriteString(w, strings.Repeat("z", MaxShownBody+100))
	}))
	defer srv.Close()
	var s Suite
	s.Add(chk("x", Must), func(t *T) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/invoke", strings.NewReader(`{"operation":"a"}`))
		req.Header.Set("Authorization", "Bearer topsecret")
		resp, err := t.Client().Do(req)
		if err != nil {
			t.Failf("%v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(body) != MaxShownBody+100 {
			t.Failf("the check reads the whole answer: got %d bytes", len(body))
		}
		t.Failf("answered %d", resp.StatusCode)
	})
	rep := s.Run(context.Background(), RunOptions{})
	res := rep.Results[0]
	if res.Message != "answered 503" || len(res.Exchanges) != 1 {
		t.Fatalf("result %+v", res)
	}
	x := res.Exchanges[0].String()
	if strings.Contains(x, "topsecret") {
		t.Errorf("a credential is shown:\n%s", x)
	}
	for _, want := range []string{`{"operation":"a"}`, "answer 503", "(redacted)", "cut at"} {
		if !strings.Contains(x, want) {
			t.Errorf("exchange lacks %q:\n%s", want, x)
		}
	}
}

func sampleReport() *Report {
	var s Suite
	s.Name = "tool"
	s.Add(chk("tool.ok", Must), func(*T) {})
	s.Add(chk("tool.bad", Must), func(t *T) {
		t.Record(Exchange{Direction: "received", Method: "POST", URL: "/cb", Request: "{}", Status: 200})
		t.Failf("answered 500 <&>")
	})
	s.Add(chk("tool.off", Should), func(t *T) { t.Skipf("not offered") })
	return s.Run(context.Background(), RunOptions{Subject: "http://127.0.0.1:1"})
}

func TestWriteJSONOneObjectPerCheck(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteJSON(&buf, true); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	var got []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, m)
	}
	if len(got) != 3 {
		t.Fatalf("got %d objects", len(got))
	}
	bad := got[1]
	if bad["id"] != "tool.bad" || bad["status"] != "fail" || bad["level"] != "MUST" || bad["rule"] != "RAP TR-2" ||
		bad["message"] != "answered 500 <&>" || bad["fix"] != "fix tool.bad" || bad["exchanges"] == nil {
		t.Errorf("failed check's object: %v", bad)
	}
	if _, ok := got[0]["fix"]; ok {
		t.Errorf("a passed check carries no fix: %v", got[0])
	}
}

func TestWriteJUnitParses(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	s := doc.Suites[0]
	if s.Tests != 3 || s.Failures != 1 || s.Skipped != 1 || s.Cases[1].Failure == nil ||
		s.Cases[1].Failure.Message != "answered 500 <&>" || s.Cases[2].Skipped == nil {
		t.Errorf("parsed %+v", s)
	}
	if !strings.Contains(s.Cases[1].Failure.Text, "fix tool.bad") {
		t.Errorf("the failure's text holds the fix: %q", s.Cases[1].Failure.Text)
	}
}

func TestWriteTextShowsFixLinkAndVerdict(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteText(&buf, true); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"FAIL    MUST    tool.bad", "fix: fix tool.bad", DocURL + "#toolbad",
		"← POST /cb", "tool.off: not offered", "does not conform",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestAlwaysRunChecksRunWhenNotSelected(t *testing.T) {
	var s Suite
	s.Add(chk("base", Must), func(t *T) {})
	s.Add(chk("other", Must), func(t *T) {})
	s.Add(chk("picked", Must), func(t *T) { t.Requires("base") })
	s.AlwaysRun("base")
	cleaned := false
	s.Cleanup(func() { cleaned = true })
	rep := s.Run(context.Background(), RunOptions{Only: []string{"picked"}})
	for id, want := range map[string]Status{"base": Pass, "other": Skip, "picked": Pass} {
		if res, _ := rep.Result(id); res.Status != want {
			t.Errorf("%s: %s (%s), want %s", id, res.Status, res.Message, want)
		}
	}
	if !cleaned {
		t.Error("the cleanup did not run at the end of the run")
	}
}
