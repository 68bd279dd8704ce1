package conformance

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// runFake runs the runtime suite against a fake runtime broken in the
// given ways. Every action of the fake is done before its driver call
// returns, so a check that waits in vain fails at the check timeout while
// the others finish at once.
func runFake(t *testing.T, broken ...string) *Report {
	t.Helper()
	kit, err := ListenRuntimeKit("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kit.Close() })
	f := newFakeRuntime(t, kit, broken...)
	// A conforming fake never makes a check wait, so the long timeout of
	// the conforming run costs nothing; a broken one makes its check wait
	// in vain until the short one.
	timeout := 5 * time.Second
	if len(broken) == 0 {
		timeout = time.Minute
	}
	s := runtimeSuiteWith(RuntimeConfig{Kit: kit, API: "fake", MigrateTo: "http://destination.invalid"}, f)
	return s.Run(context.Background(), RunOptions{Subject: "fake", CheckTimeout: timeout})
}

func failedIDs(rep *Report) []string {
	var out []string
	for _, res := range rep.Results {
		if res.Status == Fail {
			out = append(out, res.ID+" ("+res.Message+")")
		}
	}
	return out
}

// A runtime that follows the rules passes every check but the timeout's,
// which it does not offer.
func TestRuntimeSuiteFakeConforms(t *testing.T) {
	rep := runFake(t)
	if f := failedIDs(rep); len(f) > 0 {
		t.Fatalf("failed: %v", f)
	}
	for _, res := range rep.Results {
		if res.Status == Skip && res.ID != checkRuntimeTimeout.ID {
			t.Errorf("%s skipped: %s", res.ID, res.Message)
		}
	}
}

// Each way of breaking a rule fails exactly the check of that rule (the
// checks that build on it may be skipped, none fails).
func TestRuntimeSuiteBrokenRuntimeFailsItsCheck(t *testing.T) {
	cases := map[string]string{
		brokenNoDiscovery:     checkRuntimeDiscovery.ID,             // RAP TS-4
		brokenNoGroupID:       checkRuntimeInvocationFields.ID,      // RAP IN-1
		brokenTextPlain:       checkRuntimeInvocationContentType.ID, // RAP TR-1
		brokenNoAncestors:     checkRuntimeAncestors.ID,             // RAP IN-1, IN-2
		brokenNoRetry:         checkRuntimeRetry.ID,                 // RAP TR-3
		brokenRetry4xx:        checkRuntimeRefused.ID,               // RAP TR-3, TR-4
		brokenDuplicate:       checkRuntimeDuplicate.ID,             // RAP RE-6
		brokenInjectUnknown:   checkRuntimeUnknownCall.ID,           // RAP RE-5
		brokenSharedURL:       checkRuntimeCallbackAuth.ID,          // RAP TR-7
		brokenNoChoiceAnswer:  checkRuntimeUserChoice.ID,            // RAP UC-2
		brokenOAuthEndsCall:   checkRuntimeOAuth.ID,                 // RAP OA-1
		brokenView500:         checkRuntimeViewUpdate.ID,            // RAP VU-1
		brokenDropEarly:       checkRuntimeEarlyEvent.ID,            // RAP SU-3
		brokenDropEvents:      checkRuntimeSubscriptionEvent.ID,     // RAP SU-5
		brokenNoCancel:        checkRuntimeCancelNotice.ID,          // RAP CA-1
		brokenCancelWrongConv: checkRuntimeCancelNotice.ID,          // RAP CA-1
		brokenInjectLate:      checkRuntimeCancelLate.ID,            // RAP CA-2
		brokenNoClose:         checkRuntimeCloseNotice.ID,           // RAP TC-1
		brokenNoMigrate:       checkRuntimeMigrate.ID,               // RAP MI-2
	}
	for broken, want := range cases {
		t.Run(broken, func(t *testing.T) {
			t.Parallel()
			rep := runFake(t, broken)
			f := failedIDs(rep)
			if len(f) != 1 || !strings.HasPrefix(f[0], want+" ") {
				t.Errorf("failed %v, want exactly %s", f, want)
			}
		})
	}
}

// Every check of the runtime suite is explained under its ID in
// docs/conformance.md, where Check.Link points.
func TestRuntimeChecksDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	if i := strings.Index(section, "## Runtime checks"); i >= 0 {
		section = section[i:]
	} else {
		t.Fatal(`docs/conformance.md has no "## Runtime checks" section`)
	}
	for _, c := range RuntimeSuite(RuntimeConfig{}).Checks() {
		if !strings.Contains(section, "\n### "+c.ID+"\n") {
			t.Errorf("docs/conformance.md's runtime checks have no subsection %q", "### "+c.ID)
		}
		if !strings.HasPrefix(c.ID, "runtime.") || c.Fix == "" || c.Rule == "" || c.Title == "" {
			t.Errorf("check %s lacks a runtime. ID, a rule, a title or a fix", c.ID)
		}
	}
}

func TestTamperURL(t *testing.T) {
	for _, u := range []string{
		"http://h/rap/callback/MmYwYzhmZTQ.dG9vbHVfMDE.3pljuAYCkizgQQ",
		"https://h/cb?token=0123456789abcdef0123&x=1",
	} {
		got, ok := tamperURL(u)
		if !ok || got == u {
			t.Errorf("tamperURL(%q) = %q, %v; want another URL", u, got, ok)
		}
	}
	if _, ok := tamperURL("http://127.0.0.1:3000/callback"); ok {
		t.Error("a URL without a token cannot be tampered with")
	}
}
