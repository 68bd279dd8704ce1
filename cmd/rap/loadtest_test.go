package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
)

// reportValue returns the number that starts the value of a report row.
func reportValue(t *testing.T, out, row string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(row) + ` +(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no row %q in:\n%s", row, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// An open-loop run makes exactly rate×duration sends, and every
// acknowledged invocation's callback arrives (RAP IN-4).
func TestLoadtestOpenLoop(t *testing.T) {
	code, out, errOut := runVerb(t, invokeContext(t), "loadtest", "ack", "--rate", "200", "--duration", "1s")
	if code != 0 {
		t.Fatalf("status %d, stderr:\n%s", code, errOut)
	}
	if reportValue(t, out, "sent") != 200 || reportValue(t, out, "acknowledged (200)") != 200 ||
		reportValue(t, out, "refused (non-200)") != 0 || reportValue(t, out, "failed (transport)") != 0 {
		t.Errorf("report:\n%s", out)
	}
	if !regexp.MustCompile(`callbacks received .*; 200 after`).MatchString(out) {
		t.Errorf("not every callback arrived:\n%s", out)
	}
	for _, row := range []string{"time to ack p50", "time to ack p99", "time to ack max", "worst schedule lag"} {
		if !strings.Contains(out, "  "+row+" ") {
			t.Errorf("report lacks %q", row)
		}
	}
}

func TestLoadtestFlatOut(t *testing.T) {
	code, out, errOut := runVerb(t, invokeContext(t), "loadtest", "ack", "--rate", "0", "--duration", "500ms", "--concurrency", "4")
	if code != 0 {
		t.Fatalf("status %d, stderr:\n%s", code, errOut)
	}
	acked := reportValue(t, out, "acknowledged (200)")
	if acked == 0 || reportValue(t, out, "sent") != acked || !strings.Contains(out, "flat out, 4 workers") {
		t.Errorf("report:\n%s", out)
	}
	if !strings.Contains(out, "; "+strconv.Itoa(acked)+" after") {
		t.Errorf("not every callback arrived:\n%s", out)
	}
}

// RAP TR-4: refusals are counted and reported, not hidden.
func TestLoadtestRefused(t *testing.T) {
	srv := serveGettime(t, &rap.ServerOptions{BearerToken: "tok"})
	t.Setenv(envToolToken, "")
	code, out, errOut := runVerb(t, invokeContext(t), "loadtest", "ack", "--url", srv.URL, "--rate", "50", "--duration", "200ms")
	if code != 1 || reportValue(t, out, "refused (non-200)") != 10 || !strings.Contains(errOut, "status 401") {
		t.Errorf("status %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, _ = runVerb(t, invokeContext(t), "loadtest", "ack", "--url", srv.URL, "--token", "tok", "--rate", "50", "--duration", "200ms")
	if code != 0 || reportValue(t, out, "acknowledged (200)") != 10 {
		t.Errorf("with the token: status %d, stdout:\n%s", code, out)
	}
}

func TestLoadtestUsage(t *testing.T) {
	ctx := invokeContext(t)
	for _, args := range [][]string{
		{"loadtest"},
		{"loadtest", "nack"},
		{"loadtest", "ack", "--rate", "-1"},
		{"loadtest", "ack", "--duration", "0s"},
		{"loadtest", "ack", "--concurrency", "0"},
		{"loadtest", "ack", "--warmup", "-1s"},
		{"loadtest", "ack", "--url", "ftp://x"},
		{"loadtest", "ack", "--args", "[]"},
	} {
		if code, _, errOut := runVerb(t, ctx, args...); code != 2 || !strings.Contains(errOut, "usage: rap loadtest") {
			t.Errorf("%q: status %d, stderr %q", args, code, errOut)
		}
	}
}

func TestLoadtestServerProcWithURL(t *testing.T) {
	code, _, errOut := runVerb(t, invokeContext(t), "loadtest", "ack", "--server-proc", "--url", "http://127.0.0.1:1")
	if code != 2 || !strings.Contains(errOut, "--server-proc") {
		t.Errorf("status %d, stderr %q", code, errOut)
	}
}
