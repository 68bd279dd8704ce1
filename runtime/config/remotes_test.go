package config

import (
	"strings"
	"testing"
)

// "remotes" names other runtimes with the variable holding each token:
// a good entry parses, a bad URL, name or token variable is an error that
// names the entry, a misspelt member is caught, the first file naming a
// remote wins, and an unset token variable is an error naming it.
func TestRemotes(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets": [], "remotes": {"office": {"url": "https://agents.example/", "token_env": "OFFICE_TOKEN"}, "lab": {"url": "http://10.0.0.5:8080"}}}`), "a.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.RemoteNames(); strings.Join(got, ",") != "lab,office" || f.Remotes["office"].URL != "https://agents.example" {
		t.Fatalf("remotes = %v %+v", got, f.Remotes)
	}
	for _, c := range []struct{ body, want string }{
		{`{"office": {"url": "ftp://x"}}`, "remotes.office.url"},
		{`{"bad name!": {"url": "http://x"}}`, "remotes.bad name!"},
		{`{"office": {"url": "http://x", "token_env": "s3cret-token-value"}}`, "not the name of an environment variable"},
		{`{"office": {"url": "http://x", "token": "s3cret"}}`, "unknown field"},
	} {
		_, err := Parse([]byte(`{"tool_sets": [], "remotes": `+c.body+`}`), "a.json")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("remotes %s: %v; want an error containing %q", c.body, err, c.want)
		}
	}
	if _, err := Parse([]byte(`{"tool_sets": [], "remote": {}}`), "a.json"); err == nil || !strings.Contains(err.Error(), "remote") {
		t.Errorf("a misspelt remotes: %v; want it caught", err)
	}
	other, _ := Parse([]byte(`{"tool_sets": [], "remotes": {"office": {"url": "http://other"}, "home": {"url": "http://home"}}}`), "b.json")
	f.Merge(other)
	if f.Remotes["office"].URL != "https://agents.example" || f.Remotes["home"].URL != "http://home" {
		t.Errorf("merged remotes = %+v; want the first file's office and the second's home", f.Remotes)
	}
	_, err = f.ResolveRemotes(func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "OFFICE_TOKEN") {
		t.Errorf("an unset token variable: %v; want an error naming OFFICE_TOKEN", err)
	}
	got, err := f.ResolveRemotes(func(k string) string { return map[string]string{"OFFICE_TOKEN": "tok"}[k] })
	if err != nil || got["office"].Token != "tok" || got["lab"].Token != "" {
		t.Errorf("resolved remotes = %+v, %v", got, err)
	}
}

// A toolset_server entry's "budget" is read; one without a positive limit
// is refused, and a misspelt one is caught.
func TestToolsetBudget(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets": [{"type": "toolset_server", "server_url": "http://127.0.0.1:3001/", "budget": {"tokens": 5000, "usd": 0.5}}]}`), "a.json")
	if err != nil {
		t.Fatal(err)
	}
	if b := f.ToolSets[0].Budget; b == nil || b.Tokens != 5000 || b.USD != 0.5 {
		t.Fatalf("budget = %+v", b)
	}
	for _, body := range []string{`{"tokens": 0}`, `{"usd": -1}`} {
		_, err := Parse([]byte(`{"tool_sets": [{"type": "toolset_server", "server_url": "http://x", "budget": `+body+`}]}`), "a.json")
		if err == nil || !strings.Contains(err.Error(), "tool_sets[0].budget") {
			t.Errorf("budget %s: %v; want a refusal naming it", body, err)
		}
	}
}
