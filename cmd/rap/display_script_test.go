package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The acceptance example, and the DS-2 fallback for each kind of
// failure: the frontend's text on stdout, the reason on stderr, status 1.
func TestDisplayScriptCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.rhai")
	if err := os.WriteFile(file, []byte(`let n = args.number; "#" + n`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		code       int
		out, inErr string
	}{
		{"canonical", []string{`"PR #" + args.number + " on " + args.owner + "/" + args.repo`, `{"owner":"acme","repo":"widgets","number":42}`}, 0, "PR #42 on acme/widgets\n", ""},
		{"from file", []string{"@" + file, `{"number":7}`}, 0, "#7\n", ""},
		{"missing key reads as unit", []string{`if args.x == () { "none" } else { "some" }`, `{}`}, 0, "none\n", ""},
		// RAP DS-2: a non-string result falls back to name(args).
		{"not a string", []string{`42`, `{"a":1}`, "--tool", "get_pr"}, 1, "get_pr({\"a\":1})\n", "not a string"},
		{"syntax error", []string{`"unterminated`, `{}`, "--tool", "t"}, 1, "t({})\n", "fell back"},
		{"throw", []string{`throw "no"`, `{"b":[1,2]}`, "--tool", "t"}, 1, "t({\"b\":[1,2]})\n", "fell back"},
		{"runaway loop stops at a limit", []string{`loop {}`, `{}`}, 1, "tool({})\n", "fell back"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runVerb(t, context.Background(), append([]string{"display-script"}, tc.args...)...)
			if code != tc.code || out != tc.out || !strings.Contains(errs, tc.inErr) {
				t.Fatalf("code %d stdout %q stderr %q; want code %d stdout %q stderr containing %q", code, out, errs, tc.code, tc.out, tc.inErr)
			}
		})
	}
}

func TestDisplayScriptCommandBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"display-script", `"x"`},
		{"display-script", `"x"`, `[1]`},
		{"display-script", `"x"`, `not json`},
		{"display-script", "@/does/not/exist", `{}`},
	} {
		code, out, errs := runVerb(t, context.Background(), args...)
		if code == 0 || out != "" || errs == "" {
			t.Errorf("%q: code %d stdout %q stderr %q; want a failure with a message and no output", args, code, out, errs)
		}
	}
}

// A displayScript that does not compile is a warning, not a violation
// (RAP DS-2, DS-4): the toolset stays valid and the status is 0.
func TestValidateWarnsOnBrokenDisplayScript(t *testing.T) {
	file := writeFile(t, "ts.json", `{"name":"t","endpoint":"http://127.0.0.1:1/","tools":[
		{"name":"ok","description":"d","inputSchema":{"type":"object"},"displayScript":"\"PR #\" + args.n"},
		{"name":"broken","description":"d","inputSchema":{"type":"object"},"displayScript":"\"unterminated"}]}`)
	code, out, errs := runVerb(t, context.Background(), "validate", file)
	if code != 0 || !strings.Contains(out, "warning: tools[1].displayScript: does not compile") ||
		strings.Contains(out, "tools[0].displayScript") || !strings.Contains(out, "OK: toolset") {
		t.Fatalf("code %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}
