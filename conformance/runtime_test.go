package conformance

import (
	"bufio"
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runFake runs the runtime suite against a fake runtime broken in the
// given ways. Every action of the fake is done before its driver call
// returns, so a check that waits in vain fails at the check timeout while
// the others finish at once.
func runFakeRuntime(t *testing.T, broken ...string) *Report {
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

func failedWithMessages(rep *Report) []string {
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
	rep := runFakeRuntime(t)
	if f := failedWithMessages(rep); len(f) > 0 {
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
			rep := runFakeRuntime(t, broken)
			f := failedWithMessages(rep)
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

// In manual mode a person follows the printed instructions (here, a
// goroutine driving the fake runtime): the checks the kit can observe
// pass, and those that must read the conversation are skipped, saying so.
func TestRuntimeSuiteManualMode(t *testing.T) {
	kit, err := ListenRuntimeKit("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer kit.Close()
	f := newFakeRuntime(t, kit)
	pr, pw := io.Pipe()
	followed := make(chan struct{})
	go func() { defer close(followed); followInstructions(t, f, pr) }()
	defer func() { pw.Close(); <-followed }()
	s := RuntimeSuite(RuntimeConfig{Kit: kit, Instructions: pw, MigrateTo: "http://destination.invalid"})
	rep := s.Run(context.Background(), RunOptions{Subject: "manual", CheckTimeout: time.Minute})
	if fl := failedWithMessages(rep); len(fl) > 0 {
		t.Errorf("failed: %v", fl)
	}
	wantSkip := map[string]bool{
		checkRuntimeDuplicate.ID: true, checkRuntimeUnknownCall.ID: true, checkRuntimeEarlyEvent.ID: true,
		checkRuntimeSubscriptionEvent.ID: true, checkRuntimeCancelLate.ID: true, checkRuntimeTimeout.ID: true,
		checkRuntimeRefused.ID: true,
	}
	for _, res := range rep.Results {
		if skipped := res.Status == Skip; skipped != wantSkip[res.ID] {
			t.Errorf("%s: %s (%s)", res.ID, res.Status, res.Message)
		}
		if res.Status == Skip && !strings.Contains(res.Message, "/v1") {
			t.Errorf("%s is skipped without saying that it needs the /v1 API: %q", res.ID, res.Message)
		}
	}
}

// followInstructions does what manual mode's instructions say, with the
// fake runtime's own calls.
func followInstructions(t *testing.T, f *fakeRuntime, r io.Reader) {
	ctx := context.Background()
	convs := map[string]string{} // step → conversation
	last := ""
	newRE := regexp.MustCompile(`^>>> \d+\. In a NEW conversation, send the agent: (.*)$`)
	sameRE := regexp.MustCompile(`^>>> \d+\. In the same conversation, send the agent: (.*)$`)
	closeRE := regexp.MustCompile(`^>>> \d+\. Close \(end\) the conversation of step "([a-z-]+)"`)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case newRE.MatchString(line):
			text := newRE.FindStringSubmatch(line)[1]
			conv, err := f.start(ctx, "", text)
			if err != nil {
				t.Error(err)
			}
			convs[stepRE.FindStringSubmatch(text)[1]], last = conv, conv
		case sameRE.MatchString(line):
			_ = f.say(ctx, last, sameRE.FindStringSubmatch(line)[1])
		case closeRE.MatchString(line):
			_ = f.close(ctx, convs[closeRE.FindStringSubmatch(line)[1]])
		case strings.Contains(line, "The agent asks"):
			cs, _ := f.choices(ctx, last)
			for _, c := range cs {
				_ = f.answerChoice(ctx, last, c.CallID, c.Prompt, 1)
			}
		case strings.Contains(line, "Move the conversation's session"):
			_ = f.move(ctx, last, "http://destination.invalid", "")
		default:
			t.Errorf("an instruction the person cannot follow: %q", line)
		}
	}
}

// A runtime that never calls the toolset fails the first check that asks
// for a call, and the later ones are skipped at once instead of each
// waiting for the check timeout.
func TestRuntimeSuiteSilentRuntime(t *testing.T) {
	kit, err := ListenRuntimeKit("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer kit.Close()
	s := RuntimeSuite(RuntimeConfig{Kit: kit, Instructions: io.Discard})
	rep := s.Run(context.Background(), RunOptions{Subject: "silent", CheckTimeout: 2 * time.Second})
	res, _ := rep.Result(checkRuntimeInvocationFields.ID)
	if res.Status != Fail || !strings.Contains(res.Message, "did not call") {
		t.Errorf("%s: %s (%s)", res.ID, res.Status, res.Message)
	}
	res, _ = rep.Result(checkRuntimeCallbackAuth.ID)
	if res.Status != Skip || !strings.Contains(res.Message, "made no call") {
		t.Errorf("%s: %s (%s)", res.ID, res.Status, res.Message)
	}
	if n := rep.Count(Fail, ""); n != 2 { // the call's and discovery's
		t.Errorf("%d failures, want 2 (fields, discovery): %v", n, failedWithMessages(rep))
	}
}
