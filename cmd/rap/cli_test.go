package main

// Tests of the command itself: exit statuses, --version,
// completion, suggestions, the shared bad-value message, help with an
// example on every verb, --log-format, and docs/cli.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gorap/gorap/runtime/config"
)

// Exit status 2 for usage errors, 1 for failures.
func TestExitStatusUsageVersusFailure(t *testing.T) {
	clearRAPEnv(t)
	missing := filepath.Join(t.TempDir(), "missing.json")
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no verb", []string{}, 0},
		{"help", []string{"help"}, 0},
		{"unknown verb", []string{"nosuchverb"}, 2},
		{"unknown flag", []string{"validate", "--nosuchflag", missing}, 2},
		{"unknown persistent flag value", []string{"validate", "--log-format", "xml", missing}, 2},
		{"bad flag value", []string{"invoke", "--wait", "soon", "http://127.0.0.1:1", "op"}, 2},
		{"missing argument", []string{"validate"}, 2},
		{"extra argument", []string{"serve", "now"}, 2},
		{"flag without value", []string{"validate", "--tool-token"}, 2},
		{"unknown subcommand", []string{"bridge", "nope"}, 2},
		{"help of an unknown verb", []string{"help", "nosuchverb"}, 2},
		{"help of a verb", []string{"help", "bridge", "mcp"}, 0},
		{"failure: unreadable manifest", []string{"validate", missing}, 1},
		{"failure: script falls back", []string{"display-script", "1 +", `{}`}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runVerb(t, invokeContext(t), tt.args...)
			if code != tt.code {
				t.Fatalf("rap %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tt.args, " "), code, tt.code, out, errOut)
			}
			if code == 2 && !strings.Contains(errOut, "--help") {
				t.Errorf("a usage error does not point to --help:\n%s", errOut)
			}
		})
	}
}

// rap --version prints the module version and commit.
func TestVersion(t *testing.T) {
	code, out, _ := runVerb(t, context.Background(), "--version")
	if code != 0 || !strings.HasPrefix(out, "rap ") || !strings.Contains(out, "github.com/gorap/gorap") || !strings.Contains(out, "commit") {
		t.Fatalf("rap --version: exit %d, output:\n%s", code, out)
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/gorap/gorap", Version: "v0.9.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.time", Value: "2026-11-23T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := versionString(bi)
	for _, want := range []string{"rap v0.9.0 (github.com/gorap/gorap)", "commit 0123456789abcdef (2026-11-23T10:00:00Z), with uncommitted changes", "go1.26.8"} {
		if !strings.Contains(got, want) {
			t.Errorf("versionString lacks %q:\n%s", want, got)
		}
	}
	if got := versionString(nil); !strings.Contains(got, "unknown version") {
		t.Errorf("without build info: %q", got)
	}
	// "rap version" says the same as "rap --version".
	if code, verb, _ := runVerb(t, context.Background(), "version"); code != 0 || verb != out {
		t.Errorf("rap version: exit %d, output %q; want rap --version's %q", code, verb, out)
	}
}

// rap invoke reports an unreachable tool server in its own words, without
// the prefix of the library it is built on.
func TestInvokeErrorHasNoLibraryPrefix(t *testing.T) {
	code, _, errOut := runVerb(t, context.Background(), "invoke", "http://127.0.0.1:1", "get_time")
	if code != 1 || strings.Contains(errOut, "raptest") || !strings.Contains(errOut, "check the base URL") {
		t.Errorf("rap invoke of an unreachable server: exit %d, stderr %q", code, errOut)
	}
}

// Completion descriptions show a flag's usage as the shell prints it:
// without the backquotes that name its argument in --help.
func TestCompletionDescriptionsHaveNoBackquotes(t *testing.T) {
	code, out, _ := runVerb(t, context.Background(), "__complete", "serve", "--tls")
	if code != 0 || !strings.Contains(out, "--tls-cert\t") || !strings.Contains(out, "PEM FILE") || strings.Contains(out, "`") {
		t.Errorf("rap __complete serve --tls: exit %d, output:\n%s", code, out)
	}
}

// Shell completion scripts for the four shells.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash":       "__start_rap",
		"zsh":        "#compdef rap",
		"fish":       "complete -c rap",
		"powershell": "Register-ArgumentCompleter",
	} {
		code, out, errOut := runVerb(t, context.Background(), "completion", shell)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("rap completion %s: exit %d, output lacks %q (%d bytes); stderr %s", shell, code, want, len(out), errOut)
		}
	}
	// Completion of verbs and of a verb's flags, as the shell asks.
	code, out, _ := runVerb(t, context.Background(), cobra.ShellCompRequestCmd, "ser")
	if code != 0 || !strings.Contains(out, "serve") {
		t.Errorf("completing ser: exit %d, %s", code, out)
	}
	code, out, _ = runVerb(t, context.Background(), cobra.ShellCompRequestCmd, "invoke", "--tool")
	if code != 0 || !strings.Contains(out, "--tool-token") {
		t.Errorf("completing invoke --tool: exit %d, %s", code, out)
	}
}

// Suggestions for mistyped verbs and flags.
func TestSuggestions(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serv"}, "Did you mean this?\n\tserve"},
		{[]string{"valdate", "x"}, "Did you mean this?\n\tvalidate"},
		{[]string{"bridge", "mpc"}, "Did you mean this?\n\tmcp"},
		{[]string{"help", "serv"}, "Did you mean this?\n\tserve"},
		{[]string{"serve", "--listn", "x"}, "Did you mean this?\n\t--listen"},
		{[]string{"invoke", "--tokn", "x"}, "--tool-token"},
		{[]string{"chat", "--log-levl", "debug"}, "--log-level"},
	} {
		code, _, errOut := runVerb(t, context.Background(), tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("rap %s: exit %d, stderr lacks %q:\n%s", strings.Join(tt.args, " "), code, tt.want, errOut)
		}
	}
}

// A bad flag value and the matching bad environment
// variable give the same message (one function validates both) and both
// exit 2.
func TestBadFlagAndEnvSameMessage(t *testing.T) {
	for _, tt := range []struct {
		verb  []string
		flag  string
		env   string
		value string
	}{
		{[]string{"serve"}, "tool-timeout", config.EnvToolTimeout, "soon"},
		{[]string{"serve"}, "max-subscriptions", config.EnvMaxSubscriptions, "lots"},
		{[]string{"serve"}, "model-idle-timeout", config.EnvModelIdleTimeout, "1 minute"},
		{[]string{"serve"}, "choice-response-host", config.EnvChoiceResponseHosts, "https://x/y"},
		{[]string{"serve"}, "lease-ttl", config.EnvLeaseTTL, "0"},
		{[]string{"serve"}, "lease-ttl", config.EnvLeaseTTL, "500ms"},
		{[]string{"serve"}, "sweep-every", config.EnvSweepEvery, "-1s"},
		{[]string{"chat"}, "log-level", config.EnvLogLevel, "loud"},
		{[]string{"example", "get-time"}, "log-format", envLogFormat, "xml"},
	} {
		t.Run(tt.flag, func(t *testing.T) {
			clearRAPEnv(t)
			args := append(append([]string{}, tt.verb...), "--data-dir", t.TempDir())
			if tt.verb[0] != "serve" {
				args = tt.verb
			}
			code, _, flagErr := runVerb(t, invokeContext(t), append(args, "--"+tt.flag, tt.value)...)
			if code != 2 {
				t.Fatalf("--%s %q: exit %d, want 2:\n%s", tt.flag, tt.value, code, flagErr)
			}
			t.Setenv(tt.env, tt.value)
			code, _, envErr := runVerb(t, invokeContext(t), args...)
			if code != 2 {
				t.Fatalf("%s=%q: exit %d, want 2:\n%s", tt.env, tt.value, code, envErr)
			}
			fromFlag := firstLine(strings.Replace(flagErr, "--"+tt.flag, "SOURCE", 1))
			fromEnv := firstLine(strings.Replace(envErr, tt.env, "SOURCE", 1))
			if fromFlag != fromEnv || !strings.Contains(fromFlag, `invalid value "`) {
				t.Errorf("different messages:\n flag: %s\n  env: %s", firstLine(flagErr), firstLine(envErr))
			}
		})
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Every verb has help with an example.
func TestEveryVerbHasHelpWithExample(t *testing.T) {
	root := newRootCmd(&app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: docsEnv})
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c == root || c.Hidden || !c.IsAvailableCommand() && c.Name() != "help" {
			return
		}
		n++
		path := strings.Fields(c.CommandPath())[1:]
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no example", c.CommandPath())
		}
		if strings.TrimSpace(c.Short) == "" {
			t.Errorf("%s has no summary", c.CommandPath())
		}
		code, out, errOut := runVerb(t, context.Background(), append(path, "--help")...)
		if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--log-format") {
			t.Errorf("%s --help: exit %d, no Examples: or --log-format:\n%s%s", c.CommandPath(), code, out, errOut)
		}
	}
	walk(root)
	if n < 15 {
		t.Errorf("walked only %d verbs", n)
	}
}

// --log-level and --log-format reach every verb's logger.
func TestLogFormatJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
	root := newRootCmd(a)
	root.AddCommand(&cobra.Command{Use: "logtest", RunE: func(*cobra.Command, []string) error {
		a.log.Debug("hidden")
		a.log.Warn("shown", "k", "v")
		return nil
	}})
	root.SetArgs([]string{"logtest", "--log-format", "json", "--log-level", "warn"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(errOut.Bytes(), &rec); err != nil || rec["msg"] != "shown" || rec["k"] != "v" {
		t.Fatalf("want one JSON record of the warning, got %q (%v)", errOut.String(), err)
	}
}

// docs/cli.md is generated from the command tree; run
// "go generate ./cmd/rap" after changing a verb.
func TestCLIDocsUpToDate(t *testing.T) {
	want := cliDocs()
	got, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatalf("%v; run: go generate ./cmd/rap", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/cli.md is out of date with the command tree; run: go generate ./cmd/rap")
	}
	for _, s := range []string{"## rap serve", "### rap bridge mcp", "--tool-token", "rap completion"} {
		if !bytes.Contains(want, []byte(s)) {
			t.Errorf("docs/cli.md lacks %q", s)
		}
	}
}

// One meaning per flag name. --token is the runtime's
// client token, visible only on the verbs that talk to the runtime's /v1
// API; elsewhere it is the deprecated, hidden alias of --tool-token. A
// flag name has one type on every verb.
func TestOneMeaningPerFlagName(t *testing.T) {
	root := newRootCmd(&app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: docsEnv})
	clientVerbs := map[string]bool{"rap serve": true, "rap chat": true, "rap delete": true, "rap status": true, "rap export": true, "rap import": true, "rap migrate": true,
		"rap mcp serve":           true, // its --token is what MCP clients send
		"rap conformance runtime": true}
	types := map[string]map[string][]string{} // flag name → type → verbs
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if types[f.Name] == nil {
				types[f.Name] = map[string][]string{}
			}
			types[f.Name][f.Value.Type()] = append(types[f.Name][f.Value.Type()], c.CommandPath())
			if f.Name != "token" {
				return
			}
			switch {
			case clientVerbs[c.CommandPath()]:
				if f.Hidden || !strings.Contains(f.Usage, config.EnvToken) {
					t.Errorf("%s --token: hidden %v, usage %q; want the visible client token (%s)", c.CommandPath(), f.Hidden, f.Usage, config.EnvToken)
				}
			case f.Deprecated == "" || !f.Hidden || c.Flags().Lookup("tool-token") == nil:
				t.Errorf("%s --token is not the hidden deprecated alias of --tool-token", c.CommandPath())
			}
		})
	}
	walk(root)
	for name, byType := range types {
		if len(byType) > 1 {
			t.Errorf("--%s has several types: %v", name, byType)
		}
	}
	if len(types["tool-token"]) == 0 {
		t.Error("no verb has --tool-token")
	}
}

// Secrets from the environment never show in help output (flag defaults
// come from the code, the environment is read only when a verb runs).
func TestHelpShowsNoSecrets(t *testing.T) {
	t.Setenv(config.EnvToken, "client-Zq8xK")
	t.Setenv(config.EnvToolToken, "tool-Zq8xK")
	for _, verb := range [][]string{{"serve"}, {"chat"}, {"invoke"}, {"bridge", "mcp"}, {"example"}} {
		_, out, errOut := runVerb(t, context.Background(), append(verb, "--help")...)
		if strings.Contains(out+errOut, "Zq8xK") {
			t.Errorf("rap %s --help shows a secret:\n%s", strings.Join(verb, " "), out)
		}
	}
}

// The list settings' environment variables hold several items (RAP_CONFIG
// separated like PATH, RAP_CHOICE_RESPONSE_HOSTS by commas); a flag
// replaces the variable's list.
func TestServeListSettingsFromEnv(t *testing.T) {
	clearRAPEnv(t)
	t.Setenv(config.EnvConfig, "a.json"+string(os.PathListSeparator)+"b.json")
	t.Setenv(config.EnvChoiceResponseHosts, "approvals.internal:8443, hooks.example")
	s, err := serveSettingsFor()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.ConfigFiles, " ") != "a.json b.json" || strings.Join(s.ChoiceResponseHosts, " ") != "approvals.internal:8443 hooks.example" {
		t.Errorf("from the environment: config %q, choice hosts %q", s.ConfigFiles, s.ChoiceResponseHosts)
	}
	s, err = serveSettingsFor("--config", "c.json", "--choice-response-host", "x.internal")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.ConfigFiles, " ") != "c.json" || strings.Join(s.ChoiceResponseHosts, " ") != "x.internal" {
		t.Errorf("flags over the environment: config %q, choice hosts %q", s.ConfigFiles, s.ChoiceResponseHosts)
	}
}
