package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, path, data string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// RAP CF-1: the reference's local config format.
func TestParseToolsetServer(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets": [
		{"type": "toolset_server", "server_url": "http://127.0.0.1:3001/"},
		{"type": "toolset_server", "server_url": "https://tools.example/rap", "id": "remote"}
	]}`), "rap.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://127.0.0.1:3001", "https://tools.example/rap"}
	if got := f.ServerURLs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ServerURLs() = %q, want %q", got, want)
	}
	if f.ToolSets[1].ID != "remote" {
		t.Errorf("ID = %q, want remote", f.ToolSets[1].ID)
	}
	if f.ToolSets[0].Source != "rap.json: tool_sets[0]" {
		t.Errorf("Source = %q", f.ToolSets[0].Source)
	}
}

func TestParseEmptyList(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets": []}`), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.ServerURLs()) != 0 {
		t.Fatalf("want no servers, got %v", f.ServerURLs())
	}
}

// RAP CF-1: the other entry types of the reference are recognised and
// rejected by name until gorap supports them; unknown types are rejected
// naming the type; bad JSON names the file and line.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []string // substrings of the error
	}{
		{"mcp_server", `{"tool_sets": [{"type":"toolset_server","server_url":"http://127.0.0.1:1"}, {"type":"mcp_server","name":"x"}]}`,
			[]string{"f.json: ", `tool_sets[1].command: missing`}}, // mcp_server entries are supported
		// toolset_command entries are supported; a string
		// command with shell syntax is refused (gorap uses no shell).
		{"toolset_command shell", `{"tool_sets": [{"type":"toolset_command","command":"srv | tee log"}]}`,
			[]string{`tool_sets[0].command: "srv | tee log" uses shell syntax ("|")`, "array"}},
		{"toolset_command empty", `{"tool_sets": [{"type":"toolset_command","command":[]}]}`,
			[]string{`tool_sets[0].command: is empty`}},
		{"toolset_command unknown field", `{"tool_sets": [{"type":"toolset_command","command":["x"],"port":3}]}`,
			[]string{`tool_sets[0]: json: unknown field "port"`}},
		{"http_mcp_server", `{"tool_sets": [{"type":"http_mcp_server","name":"x","url":"ftp://x"}]}`,
			[]string{`tool_sets[0].url: "ftp://x" is not an absolute http:// or https:// URL`}},
		{"unknown type", `{"tool_sets": [{"type":"carrier_pigeon"}]}`,
			[]string{`tool_sets[0]: unknown entry type "carrier_pigeon"`, "toolset_server"}},
		{"missing type", `{"tool_sets": [{"server_url":"http://127.0.0.1:1"}]}`,
			[]string{`tool_sets[0].type: missing`}},
		{"type not string", `{"tool_sets": [{"type": 7}]}`,
			[]string{`tool_sets[0].type: must be a string`}},
		{"entry not object", `{"tool_sets": ["http://x"]}`,
			[]string{`tool_sets[0]: is a JSON string; want an object`}},
		{"missing server_url", `{"tool_sets": [{"type":"toolset_server"}]}`,
			[]string{`tool_sets[0].server_url: missing`}},
		{"server_url not string", `{"tool_sets": [{"type":"toolset_server","server_url":3001}]}`,
			[]string{`tool_sets[0].server_url: is a JSON number; want a string`}},
		{"relative url", `{"tool_sets": [{"type":"toolset_server","server_url":"127.0.0.1:3001"}]}`,
			[]string{`tool_sets[0].server_url:`, "http://"}},
		{"ftp url", `{"tool_sets": [{"type":"toolset_server","server_url":"ftp://h/x"}]}`,
			[]string{`tool_sets[0].server_url:`, "must start with http:// or https://"}},
		{"query", `{"tool_sets": [{"type":"toolset_server","server_url":"http://h/x?a=b"}]}`,
			[]string{`tool_sets[0].server_url:`, "query"}},
		{"missing tool_sets", `{"toolsets": []}`, []string{"f.json: tool_sets: missing", `the file has "toolsets" (did you mean "tool_sets"?)`}},
		{"misspelt server_url", `{"tool_sets": [{"type":"toolset_server","serverurl":"http://127.0.0.1:1","extra":1}]}`,
			[]string{`tool_sets[0].server_url: missing`, `the entry has "serverurl" (did you mean "server_url"?)`}},
		{"server_url with a slip", `{"tool_sets": [{"type":"toolset_server","server_ur":"http://127.0.0.1:1"}]}`,
			[]string{`the entry has "server_ur" (did you mean "server_url"?)`}},
		{"tool_sets not array", `{"tool_sets": {}}`, []string{"f.json:1: tool_sets: is a JSON object; want an array"}},
		{"syntax error line 3", "{\n  \"tool_sets\": [\n    {\"type\": \"toolset_server\",,}\n  ]\n}", []string{"f.json:3: invalid JSON"}},
		{"truncated", "{\n  \"tool_sets\": [\n", []string{"f.json:", "invalid JSON"}},
		{"empty", "  \n", []string{"f.json: file is empty"}},
		{"trailing data", `{"tool_sets": []} {}`, []string{"f.json:1: unexpected data after the JSON object"}},
		{"top-level array", `[]`, []string{"f.json:1:", "want an object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.data), "f.json")
			if err == nil {
				t.Fatalf("Parse succeeded with %+v; want an error", f)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a *config.Error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseTooLarge(t *testing.T) {
	data := []byte(`{"tool_sets": [], "pad": "` + strings.Repeat("x", MaxFileBytes) + `"}`)
	_, err := Parse(data, "big.json")
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("err = %v, want a size-limit error", err)
	}
}

func TestLoadFileNamesFile(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, filepath.Join(dir, "bad.json"), "{\n\"tool_sets\": [\n  {\"type\": \"mcp_server\"}\n]}")
	_, err := LoadFile(p)
	if err == nil || !strings.Contains(err.Error(), p+": tool_sets[0].name: ") {
		t.Fatalf("err = %v", err)
	}
	_, err = LoadFile(filepath.Join(dir, "missing.json"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("err = %v, want a not-exist error naming the file", err)
	}
}

// RAP CF-1: a user-level and a project-level file are merged.
func TestLoadMerged(t *testing.T) {
	dir := t.TempDir()
	project := writeFile(t, filepath.Join(dir, "proj", ".rap", "rap.json"), `{"tool_sets": [
		{"type":"toolset_server","server_url":"http://127.0.0.1:3001","id":"time"},
		{"type":"toolset_server","server_url":"http://127.0.0.1:3002"}]}`)
	user := writeFile(t, filepath.Join(dir, "home", ".config", "rap", "rap.json"), `{"tool_sets": [
		{"type":"toolset_server","server_url":"http://127.0.0.1:9999","id":"time"},
		{"type":"toolset_server","server_url":"http://127.0.0.1:3002/"},
		{"type":"toolset_server","server_url":"http://127.0.0.1:3003"}]}`)
	f, used, err := LoadMerged(project, user)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(used, []string{project, user}) {
		t.Errorf("used = %v", used)
	}
	want := []string{"http://127.0.0.1:3001", "http://127.0.0.1:3002", "http://127.0.0.1:3003"}
	if got := f.ServerURLs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("merged = %v, want %v (project first; same id or URL from the user file skipped)", got, want)
	}

	// Only one of the two exists.
	f, used, err = LoadMerged(filepath.Join(dir, "nope.json"), user)
	if err != nil || len(used) != 1 || len(f.ServerURLs()) != 3 {
		t.Fatalf("user only: %v %v %v", f, used, err)
	}
	f, used, err = LoadMerged(filepath.Join(dir, "nope.json"), filepath.Join(dir, "nope2.json"))
	if err != nil || len(used) != 0 || len(f.ToolSets) != 0 {
		t.Fatalf("neither: %v %v %v", f, used, err)
	}

	// A broken user file is an error naming it, even when the project file is fine.
	writeFile(t, user, `{"tool_sets": [{"type":"mcp_server"}]}`)
	_, _, err = LoadMerged(project, user)
	if err == nil || !strings.Contains(err.Error(), user) {
		t.Fatalf("err = %v, want an error naming %s", err, user)
	}
}

func TestPaths(t *testing.T) {
	env := map[string]string{"HOME": "/home/ann"}
	getenv := func(k string) string { return env[k] }
	p, err := UserPath(getenv)
	if err != nil || p != "/home/ann/.config/rap/rap.json" {
		t.Errorf("UserPath = %q, %v", p, err)
	}
	env["XDG_CONFIG_HOME"] = "/cfg"
	if p, _ := UserPath(getenv); p != "/cfg/rap/rap.json" {
		t.Errorf("UserPath with XDG = %q", p)
	}
	if p := ProjectPath("/src/app"); p != "/src/app/.rap/rap.json" {
		t.Errorf("ProjectPath = %q", p)
	}
	if d := DefaultDataDir(getenv); d != "/home/ann/.local/share/rap" {
		t.Errorf("DefaultDataDir = %q", d)
	}
	env["XDG_DATA_HOME"] = "/data"
	if d := DefaultDataDir(getenv); d != "/data/rap" {
		t.Errorf("DefaultDataDir with XDG = %q", d)
	}
	if d := DefaultDataDir(func(string) string { return "" }); d != ".rap" {
		t.Errorf("DefaultDataDir without home = %q", d)
	}
}

// Flags override the environment, which overrides the defaults.
func TestPrecedence(t *testing.T) {
	env := map[string]string{
		"HOME":         "/home/ann",
		EnvListen:      "127.0.0.1:9000",
		EnvModel:       "openai:gpt-x",
		EnvDataDir:     "/var/rap",
		EnvToken:       "env-secret",
		EnvConfig:      "/a.json" + string(os.PathListSeparator) + "/b.json",
		EnvToolTimeout: "90s",
	}
	s, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.Listen != "127.0.0.1:9000" || s.Model != "openai:gpt-x" || s.DataDir != "/var/rap" || s.LogLevel != "info" || s.ToolTimeout != 90*time.Second {
		t.Fatalf("env not applied: %+v", s)
	}
	if !reflect.DeepEqual(s.ConfigFiles, []string{"/a.json", "/b.json"}) {
		t.Fatalf("ConfigFiles = %v", s.ConfigFiles)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var help bytes.Buffer
	fs.SetOutput(&help)
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"--model", "scripted:demo.json", "--config", "/c.json", "--log-level", "debug"}); err != nil {
		t.Fatal(err)
	}
	if s.Model != "scripted:demo.json" || s.Listen != "127.0.0.1:9000" || s.LogLevel != "debug" {
		t.Fatalf("flags not applied over env: %+v", s)
	}
	if !reflect.DeepEqual(s.ConfigFiles, []string{"/c.json"}) {
		t.Fatalf("--config should replace RAP_CONFIG: %v", s.ConfigFiles)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	// Secrets never appear in help output or logs.
	fs.PrintDefaults()
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("settings", "settings", s)
	for name, out := range map[string]string{"help": help.String(), "log": logs.String(), "String": s.String(), "fmt": fmt.Sprint(s)} {
		if strings.Contains(out, "env-secret") {
			t.Errorf("%s output leaks the token: %s", name, out)
		}
	}
	if !strings.Contains(logs.String(), "settings.token=(set)") {
		t.Errorf("log should say the token is set: %s", logs.String())
	}
}

func TestFromEnvBadTimeout(t *testing.T) {
	_, err := FromEnv(func(k string) string {
		if k == EnvToolTimeout {
			return "soon"
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), EnvToolTimeout) {
		t.Fatalf("err = %v, want one naming %s", err, EnvToolTimeout)
	}
}

func TestCheck(t *testing.T) {
	base := Defaults(func(string) string { return "/h" })
	tests := []struct {
		name   string
		mutate func(*Settings)
		want   string
	}{
		{"ok", func(*Settings) {}, ""},
		{"listen", func(s *Settings) { s.Listen = "8080" }, "listen address"},
		{"public url", func(s *Settings) { s.PublicURL = "example.com" }, "public URL"},
		{"public url query", func(s *Settings) { s.PublicURL = "http://h/?x=1" }, "query"},
		{"data dir", func(s *Settings) { s.DataDir = "" }, "--data-dir"},
		{"log level", func(s *Settings) { s.LogLevel = "loud" }, "log level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.mutate(&s)
			err := s.Check()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestPublicURLFor(t *testing.T) {
	tests := []struct{ public, addr, want string }{
		{"", "127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"", "0.0.0.0:8080", "http://127.0.0.1:8080"},
		{"", "[::]:9000", "http://127.0.0.1:9000"},
		{"", ":7000", "http://127.0.0.1:7000"},
		{"", "localhost:7000", "http://localhost:7000"},
		{"", "[::1]:7000", "http://[::1]:7000"},
		{"https://agent.example/base/", "127.0.0.1:1", "https://agent.example/base"},
	}
	for _, tt := range tests {
		s := Settings{PublicURL: tt.public}
		got, err := s.PublicURLFor(tt.addr)
		if err != nil || got != tt.want {
			t.Errorf("PublicURLFor(%q) with public %q = %q, %v; want %q", tt.addr, tt.public, got, err, tt.want)
		}
	}
	s := Settings{}
	if _, err := s.PublicURLFor("127.0.0.1:0"); err == nil {
		t.Error("port 0 should be an error: the bound port is needed")
	}
}

func TestToolServersExplicitFiles(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, filepath.Join(dir, "a.json"), `{"tool_sets":[{"type":"toolset_server","server_url":"http://127.0.0.1:1"}]}`)
	b := writeFile(t, filepath.Join(dir, "b.json"), `{"tool_sets":[{"type":"toolset_server","server_url":"http://127.0.0.1:2"}]}`)
	// A project file exists but --config replaces it.
	writeFile(t, ProjectPath(dir), `{"tool_sets":[{"type":"toolset_server","server_url":"http://127.0.0.1:3"}]}`)
	s := Settings{ConfigFiles: []string{a, b}}
	urls, used, err := s.ToolServers(dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(urls, []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}) || len(used) != 2 {
		t.Fatalf("urls = %v used = %v", urls, used)
	}
	// Without --config: the project file and the user file.
	home := filepath.Join(dir, "home")
	writeFile(t, filepath.Join(home, ".config", "rap", "rap.json"), `{"tool_sets":[{"type":"toolset_server","server_url":"http://127.0.0.1:4"}]}`)
	s = Settings{}
	urls, used, err = s.ToolServers(dir, func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(urls, []string{"http://127.0.0.1:3", "http://127.0.0.1:4"}) || len(used) != 2 {
		t.Fatalf("urls = %v used = %v", urls, used)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"tool_sets": [{"type":"toolset_server","server_url":"http://127.0.0.1:3001"}]}`))
	f.Add([]byte(`{"tool_sets": [{"type":"mcp_server"}]}`))
	f.Add([]byte("{\n"))
	f.Add([]byte(`{"tool_sets": [], "context_window": 200000, "max_result_share": 0.25}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, "fuzz.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, u := range file.ServerURLs() {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				t.Fatalf("accepted bad URL %q", u)
			}
		}
	})
}

// RAP SU-8: the per-thread subscription limit comes from
// RAP_MAX_SUBSCRIPTIONS and --max-subscriptions (the flag wins); 0 keeps
// the runtime's default; a malformed or out-of-range value is an error
// naming the variable or the flag.
func TestMaxSubscriptions(t *testing.T) {
	env := map[string]string{EnvMaxSubscriptions: "4"}
	s, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxSubscriptions != 4 {
		t.Fatalf("MaxSubscriptions from env = %d, want 4", s.MaxSubscriptions)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"--max-subscriptions", "2"}); err != nil {
		t.Fatal(err)
	}
	if s.MaxSubscriptions != 2 {
		t.Fatalf("MaxSubscriptions after the flag = %d, want 2 (flags win)", s.MaxSubscriptions)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("settings", "settings", s)
	if !strings.Contains(logs.String(), "settings.max_subscriptions=2") {
		t.Errorf("the start-up log should show the limit: %s", logs.String())
	}

	if d := Defaults(func(string) string { return "" }); d.MaxSubscriptions != 0 {
		t.Errorf("default MaxSubscriptions = %d, want 0 (the runtime's default)", d.MaxSubscriptions)
	}
	for _, bad := range []string{"many", "-1", "1.5", "99999999"} {
		_, err := FromEnv(func(k string) string {
			if k == EnvMaxSubscriptions {
				return bad
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), EnvMaxSubscriptions) || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("%s=%q: err = %v, want one naming the variable and the value", EnvMaxSubscriptions, bad, err)
		}
	}
	for _, n := range []int{-3, MaxSubscriptionsLimit + 1} {
		s := Defaults(func(string) string { return "/h" })
		s.MaxSubscriptions = n
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), "--max-subscriptions") {
			t.Errorf("Check with MaxSubscriptions %d: err = %v, want one naming --max-subscriptions", n, err)
		}
	}
}

// The store setting: RAP_STORE and --store select
// PostgreSQL; an unknown value is refused; logs never show the URL's
// password.
func TestStoreSetting(t *testing.T) {
	env := map[string]string{EnvStore: "postgres://rap:hunter2@db.internal:5432/rap?sslmode=disable"}
	s, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !s.StoreIsPostgres() || s.Check() != nil {
		t.Fatalf("RAP_STORE postgres URL: postgres=%v check=%v", s.StoreIsPostgres(), s.Check())
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "settings", s)
	if strings.Contains(buf.String(), "hunter2") || !strings.Contains(buf.String(), "postgres://db.internal:5432/rap") {
		t.Errorf("logged settings = %s; want the store's host without its password", buf.String())
	}
	for _, v := range []string{"", "sqlite"} {
		s.Store = v
		if s.StoreIsPostgres() || s.Check() != nil {
			t.Errorf("store %q: postgres=%v check=%v; want the SQLite default", v, s.StoreIsPostgres(), s.Check())
		}
	}
	s.Store = "mysql://x"
	if err := s.Check(); err == nil || !strings.Contains(err.Error(), "--store") {
		t.Errorf("store mysql://x: %v, want an error naming --store", err)
	}
}
