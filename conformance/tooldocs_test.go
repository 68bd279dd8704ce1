package conformance

import (
	"os"
	"strings"
	"testing"
)

// Every check of the tool suite has its own section in docs/conformance.md,
// headed by its ID, so that the link a report prints (Check.Link) lands on
// its explanation, and every check has a fix and a rule.
func TestEveryToolCheckIsDocumented(t *testing.T) {
	data, err := os.ReadFile("../docs/conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			headings[strings.TrimSpace(h)] = true
		}
	}
	checks := ToolSuite(ToolConfig{}).Checks()
	if len(checks) < 30 {
		t.Fatalf("the tool suite has only %d checks", len(checks))
	}
	for _, c := range checks {
		if !headings[c.ID] {
			t.Errorf("docs/conformance.md has no section \"### %s\"", c.ID)
		}
		if c.Fix == "" || c.Rule == "" || c.Title == "" || c.Level == "" {
			t.Errorf("%s lacks a fix, rule, title or level: %+v", c.ID, c)
		}
		if !strings.HasSuffix(c.Link(), "#"+strings.ReplaceAll(c.ID, ".", "")) {
			t.Errorf("%s: link %s", c.ID, c.Link())
		}
	}
}
