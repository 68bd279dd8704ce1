// Package config loads the settings of the gorap runtime: the tool servers
// it talks to, read from JSON files in the reference runtime's format
// (RAP CF-1), and the listen address, public URL, data directory, model and
// tokens, read from environment variables and command-line flags.
//
// A tool-server file looks like this:
//
//	{"tool_sets": [{"type": "toolset_server", "server_url": "http://127.0.0.1:3001"}]}
//
// Two files are merged when no file is named explicitly: the project-level
// file (.rap/rap.json in the working directory) first, then the user-level
// file ($XDG_CONFIG_HOME/rap/rap.json, by default ~/.config/rap/rap.json).
// See docs/config.md.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gorap/gorap/model"
)

// MaxFileBytes bounds the size of a tool-server configuration file.
const MaxFileBytes = 1 << 20

// Entry types of the tool_sets array (RAP CF-1).
const (
	// TypeToolsetServer is a running RAP tool server reached at server_url.
	TypeToolsetServer = "toolset_server"
	// TypeToolsetCommand spawns a tool-server binary that prints its port.
	TypeToolsetCommand = "toolset_command"
	// TypeMCPServer is a stdio MCP server proxied behind RAP.
	TypeMCPServer = "mcp_server"
	// TypeHTTPMCPServer is a remote MCP server reached over HTTP.
	TypeHTTPMCPServer = "http_mcp_server"
	// TypeToolsJSON is a Runloop tools.json bundle that "rap serve" serves
	// itself as a RAP tool server (a gorap entry type).
	TypeToolsJSON = "tools_json"
)

// recognised lists the entry types gorap reads: those of the reference
// format and gorap's own.
var recognised = map[string]bool{
	TypeToolsetServer:  true,
	TypeToolsetCommand: true,
	TypeMCPServer:      true,
	TypeHTTPMCPServer:  true,
	TypeOTCServer:      true, // see otc.go
	TypeToolsJSON:      true,
}

// ToolSet is one entry of a file's tool_sets array.
type ToolSet struct {
	// Type is the entry type, one of the Type constants.
	Type string `json:"type"`
	// ServerURL is the tool server's base URL; discovery appends
	// /.well-known/rap-toolset to it (RAP TS-4).
	ServerURL string `json:"server_url"`
	// ID optionally names the entry; when two merged files hold entries
	// with the same ID, the first file's entry wins.
	ID string `json:"id,omitempty"`
	// SHA256 pins a toolset_server's discovery document: the lowercase hex
	// SHA-256 of its RFC 8785 canonical form ("rap validate URL" prints
	// it). A session whose discovered document has another digest does not
	// offer its tools (see pin.go and docs/config.md).
	SHA256 string `json:"sha256,omitempty"`
	// Pin is "first_use" (PinFirstUse) to trust the discovery document a
	// session first discovers and refuse a different one later in that
	// session, or "".
	Pin string `json:"pin,omitempty"`
	// Budget, on a toolset_server entry, is the budget per session of
	// each of the server's tools whose definition carries none of its own
	// (x-runloop-budget); nil for none.
	Budget *Budget `json:"budget,omitempty"`
	// MCP holds the fields of an mcp_server or http_mcp_server entry
	// (see mcp.go); nil for other types.
	MCP *MCPServer `json:"-"`
	// The fields of an "otc_server" entry (see otc.go).
	OTC *OTCServer `json:"-"`
	// The fields of a "toolset_command" entry (see command.go).
	Command *ToolsetCommand `json:"-"`
	// Bundle is a tools_json entry's bundle directory (or its tools.json);
	// a relative path is relative to the config file's directory.
	Bundle string `json:"bundle,omitempty"`
	// AllowUnsigned accepts a tools_json bundle whose digest does not
	// match its manifest: for development only.
	AllowUnsigned bool `json:"allow_unsigned,omitempty"`
	// Source says where the entry came from, such as
	// "/home/me/.config/rap/rap.json: tool_sets[0]". It is not read from
	// the file.
	Source string `json:"-"`
}

// Budget is a tool's budget per session: the most tokens its results may
// add to the session's context, and the most model spend, in US dollars,
// the turns that call it may cost; zero is no limit.
type Budget struct {
	Tokens int64   `json:"tokens,omitempty"`
	USD    float64 `json:"usd,omitempty"`
}

// File is a parsed tool-server configuration.
type File struct {
	// ToolSets lists the configured tool sources in order.
	ToolSets []ToolSet `json:"tool_sets"`
	// Security holds the operator's security switches.
	Security Security `json:"security"`
	// Retention is the file's "retention": how long closed sessions are
	// kept after their last activity (0: for ever); nil when the file
	// does not say. The first file that sets it wins (retention.go).
	Retention *time.Duration `json:"-"`
	// Remotes are the file's "remotes": runtimes sessions may move to by
	// name (remotes.go). Of two files naming one remote, the first wins.
	Remotes map[string]Remote `json:"-"`
	// ContextWindow is the file's "context_window": the model's context
	// window in tokens (0: the model's own); nil when the file does not
	// say. MaxResultShare is its "max_result_share": the share of the
	// window one tool result may take in a model request (0: the
	// default). The first file that sets each wins (contextwindow.go).
	ContextWindow  *int     `json:"-"`
	MaxResultShare *float64 `json:"-"`
	// SessionBudget is the file's "session_budget": the most tokens and
	// US dollars the completions of one session may use (zero: no
	// limit); nil when the file does not say. The first file that sets
	// it wins (spend.go).
	SessionBudget *Budget `json:"-"`
	// Prices is the file's "prices": models' prices per million tokens,
	// by model name, over the list prices gorap knows. Of two files
	// pricing one model, the first wins (spend.go).
	Prices map[string]model.Price `json:"-"`
}

// Security are the "security" settings of a config file.
type Security struct {
	// ConfirmExternalActions, when false, runs tools that require
	// confirmation (tools.json requires_confirmation) without asking the
	// user. Nil, the default, means true. The first file that sets it wins.
	ConfirmExternalActions *bool `json:"confirm_external_actions,omitempty"`
}

// ConfirmExternalActions reports security.confirm_external_actions: true
// unless a file disabled it.
func (f *File) ConfirmExternalActions() bool {
	return f.Security.ConfirmExternalActions == nil || *f.Security.ConfirmExternalActions
}

// ServerURLs returns the base URLs of the toolset_server entries, in order
// and without duplicates.
func (f *File) ServerURLs() []string {
	seen := map[string]bool{}
	var urls []string
	for _, ts := range f.ToolSets {
		if ts.Type != TypeToolsetServer {
			continue
		}
		u := strings.TrimRight(ts.ServerURL, "/")
		if !seen[u] {
			seen[u] = true
			urls = append(urls, u)
		}
	}
	return urls
}

// Merge appends the entries of other to f, as the reference runtime does:
// an entry whose ID is already present in f is skipped, and so is a
// toolset_server entry whose server URL f already lists.
func (f *File) Merge(other *File) {
	if other == nil {
		return
	}
	if f.Security.ConfirmExternalActions == nil {
		f.Security.ConfirmExternalActions = other.Security.ConfirmExternalActions
	}
	if f.Retention == nil {
		f.Retention = other.Retention
	}
	if f.ContextWindow == nil {
		f.ContextWindow = other.ContextWindow
	}
	if f.MaxResultShare == nil {
		f.MaxResultShare = other.MaxResultShare
	}
	if f.SessionBudget == nil {
		f.SessionBudget = other.SessionBudget
	}
	for m, p := range other.Prices {
		if _, ok := f.Prices[m]; !ok {
			if f.Prices == nil {
				f.Prices = map[string]model.Price{}
			}
			f.Prices[m] = p
		}
	}
	for n, r := range other.Remotes {
		if _, ok := f.Remotes[n]; !ok {
			if f.Remotes == nil {
				f.Remotes = map[string]Remote{}
			}
			f.Remotes[n] = r
		}
	}
	ids := map[string]bool{}
	urls := map[string]bool{}
	for _, ts := range f.ToolSets {
		if ts.ID != "" {
			ids[ts.ID] = true
		}
		if ts.Type == TypeToolsetServer {
			urls[strings.TrimRight(ts.ServerURL, "/")] = true
		}
	}
	for _, ts := range other.ToolSets {
		if ts.ID != "" && ids[ts.ID] {
			continue
		}
		if ts.Type == TypeToolsetServer && urls[strings.TrimRight(ts.ServerURL, "/")] {
			continue
		}
		f.ToolSets = append(f.ToolSets, ts)
	}
}

// Error is a problem in a configuration file. It names the file, and the
// line or the JSON path of the offending part.
type Error struct {
	// File is the path of the file ("" for data given directly).
	File string
	// Line is the 1-based line of a syntax error, or 0.
	Line int
	// Path is the JSON path of the offending member, such as
	// "tool_sets[1].type", or "".
	Path string
	// Problem says what is wrong and what to do.
	Problem string
}

// Error formats the problem as "FILE[:LINE]: [PATH: ]PROBLEM"; the file is
// called "config" when it has no name.
func (e *Error) Error() string {
	var b strings.Builder
	name := e.File
	if name == "" {
		name = "config"
	}
	b.WriteString(name)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// Parse parses a tool-server configuration. name is the file name used in
// error messages and in each entry's Source. Every entry is checked: an
// unknown type, a recognised but unsupported type, a missing or malformed
// server_url are errors naming the entry's index.
func Parse(data []byte, name string) (*File, error) {
	if len(data) > MaxFileBytes {
		return nil, &Error{File: name, Problem: fmt.Sprintf("file is %d bytes; the limit is %d bytes", len(data), MaxFileBytes)}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{File: name, Problem: `file is empty; want a JSON object such as {"tool_sets": []}`}
	}
	var raw struct {
		ToolSets  *[]json.RawMessage `json:"tool_sets"`
		Security  *Security          `json:"security"`
		Retention json.RawMessage    `json:"retention"`
		Remotes   json.RawMessage    `json:"remotes"`
		Window    json.RawMessage    `json:"context_window"`
		Share     json.RawMessage    `json:"max_result_share"`
		Budget    json.RawMessage    `json:"session_budget"`
		Prices    json.RawMessage    `json:"prices"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, jsonError(data, name, "", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{File: name, Line: lineOf(data, int(dec.InputOffset())), Problem: "unexpected data after the JSON object"}
	}
	if raw.ToolSets == nil {
		problem := `missing; want {"tool_sets": [{"type": "toolset_server", "server_url": "http://127.0.0.1:3001"}]}`
		if misses := nearMisses(data, slices.Concat([]string{"tool_sets", "security", "retention", "remotes"}, boundKeys, spendKeys)); len(misses) > 0 {
			problem += "; the file has " + strings.Join(misses, ", ")
		}
		return nil, &Error{File: name, Path: "tool_sets", Problem: problem}
	}
	f := &File{}
	if raw.Security != nil {
		f.Security = *raw.Security
	}
	if raw.Retention != nil {
		var err error
		if f.Retention, err = parseFileRetention(raw.Retention, name); err != nil {
			return nil, err
		}
	} else if misses := nearMisses(data, []string{"retention"}); len(misses) > 0 {
		// A misspelt retention would keep every session for ever.
		return nil, &Error{File: name, Problem: "unknown member " + strings.Join(misses, ", ")}
	}
	if raw.Remotes != nil {
		var err error
		if f.Remotes, err = parseRemotes(raw.Remotes, name); err != nil {
			return nil, err
		}
	} else if misses := nearMisses(data, []string{"remotes"}); len(misses) > 0 {
		return nil, &Error{File: name, Problem: "unknown member " + strings.Join(misses, ", ")}
	}
	if err := parseFileBounds(f, raw.Window, raw.Share, name); err != nil {
		return nil, err
	}
	// A misspelt bound would leave the model's window or share to the
	// defaults unnoticed.
	var absent []string
	if raw.Window == nil {
		absent = append(absent, "context_window")
	}
	if raw.Share == nil {
		absent = append(absent, "max_result_share")
	}
	if err := parseFileSpend(f, raw.Budget, raw.Prices, name); err != nil {
		return nil, err
	}
	// A misspelt budget would leave sessions without one unnoticed.
	if raw.Budget == nil {
		absent = append(absent, "session_budget")
	}
	if raw.Prices == nil {
		absent = append(absent, "prices")
	}
	if misses := nearMisses(data, absent); len(misses) > 0 {
		return nil, &Error{File: name, Problem: "unknown member " + strings.Join(misses, ", ")}
	}
	for i, item := range *raw.ToolSets {
		path := fmt.Sprintf("tool_sets[%d]", i)
		ts, err := parseEntry(item, name, path)
		if err != nil {
			return nil, err
		}
		f.ToolSets = append(f.ToolSets, ts)
	}
	return f, nil
}

func parseEntry(item json.RawMessage, name, path string) (ToolSet, error) {
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(item, &head); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field == "" {
			return ToolSet{}, &Error{File: name, Path: path, Problem: fmt.Sprintf("is a JSON %s; want an object with a \"type\" member", ute.Value)}
		}
		return ToolSet{}, &Error{File: name, Path: path + ".type", Problem: "must be a string such as \"toolset_server\""}
	}
	if head.Type == nil || *head.Type == "" {
		return ToolSet{}, &Error{File: name, Path: path + ".type", Problem: "missing; want \"toolset_server\""}
	}
	typ := *head.Type
	if !recognised[typ] {
		return ToolSet{}, &Error{File: name, Path: path, Problem: fmt.Sprintf("unknown entry type %q; want %q, %q, %q, %q, %q or %q", typ, TypeToolsetServer, TypeToolsetCommand, TypeMCPServer, TypeHTTPMCPServer, TypeOTCServer, TypeToolsJSON)}
	}
	if typ != TypeToolsetServer {
		if err := refusePinOnOtherTypes(item, typ, name, path); err != nil {
			return ToolSet{}, err
		}
	}
	if typ == TypeMCPServer || typ == TypeHTTPMCPServer { // bridged MCP servers
		return parseMCPEntry(item, typ, name, path)
	}
	if typ == TypeOTCServer {
		return parseOTCEntry(item, name, path)
	}
	if typ == TypeToolsJSON {
		return parseToolsJSONEntry(item, name, path)
	}
	if typ == TypeToolsetCommand { // see command.go
		return parseCommandEntry(item, name, path)
	}
	if typ != TypeToolsetServer {
		return ToolSet{}, &Error{File: name, Path: path, Problem: fmt.Sprintf("entry type %q is not supported yet by gorap; run the server yourself and list it as a %q entry with its server_url", typ, TypeToolsetServer)}
	}
	var ts ToolSet
	if err := json.Unmarshal(item, &ts); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return ToolSet{}, &Error{File: name, Path: path + "." + ute.Field, Problem: fmt.Sprintf("is a JSON %s; want a %s", ute.Value, ute.Type)}
		}
		return ToolSet{}, &Error{File: name, Path: path, Problem: err.Error()}
	}
	if err := checkServerURL(ts.ServerURL); err != nil {
		problem := err.Error()
		if misses := nearMisses(item, toolsetServerKeys); len(misses) > 0 {
			problem += "; the entry has " + strings.Join(misses, ", ")
		}
		return ToolSet{}, &Error{File: name, Path: path + ".server_url", Problem: problem}
	}
	if err := checkPin(&ts, name, path); err != nil {
		return ToolSet{}, err
	}
	if b := ts.Budget; b != nil && (b.Tokens < 0 || b.USD < 0 || (b.Tokens == 0 && b.USD == 0)) {
		return ToolSet{}, &Error{File: name, Path: path + ".budget", Problem: `want {"tokens": N, "usd": X} with at least one of them above 0: the most result tokens each tool of the server may add to a session, and the most model spend in US dollars the turns that call it may cost`}
	}
	ts.ServerURL = strings.TrimRight(ts.ServerURL, "/")
	ts.Source = name + ": " + path
	if name == "" {
		ts.Source = path
	}
	return ts, nil
}

// checkServerURL accepts absolute http and https URLs without a query or
// fragment.
func checkServerURL(s string) error {
	if s == "" {
		return errors.New(`missing; want the tool server's base URL, such as "http://127.0.0.1:3001"`)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a valid URL (%v); want an absolute URL such as http://127.0.0.1:3001", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q must start with http:// or https://", s)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q must not have a query or fragment: it is a base URL that /.well-known/rap-toolset is appended to", s)
	}
	return nil
}

// jsonError turns a decoding error into an *Error that names the line.
func jsonError(data []byte, name, path string, err error) error {
	var se *json.SyntaxError
	var ute *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return &Error{File: name, Line: lineOf(data, int(se.Offset)), Problem: "invalid JSON: " + se.Error()}
	case errors.As(err, &ute):
		p := path
		if ute.Field != "" {
			p = ute.Field
		}
		return &Error{File: name, Line: lineOf(data, int(ute.Offset)), Path: p, Problem: fmt.Sprintf("is a JSON %s; want %s", ute.Value, describeType(ute.Type.String()))}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &Error{File: name, Line: lineOf(data, len(data)), Problem: "invalid JSON: the file ends before the object is complete"}
	default:
		return &Error{File: name, Problem: "invalid JSON: " + err.Error()}
	}
}

func describeType(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"), strings.HasPrefix(t, "*[]"):
		return "an array"
	case strings.HasPrefix(t, "struct"):
		return "an object"
	}
	return t
}

// lineOf returns the 1-based line number of byte offset off in data.
func lineOf(data []byte, off int) int {
	if off > len(data) {
		off = len(data)
	}
	if off < 0 {
		off = 0
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// LoadFile reads and parses one configuration file.
func LoadFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read tool-server config: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read tool-server config %s: %w", path, err)
	}
	return Parse(data, path)
}

// UserPath returns the user-level configuration file:
// $XDG_CONFIG_HOME/rap/rap.json, or ~/.config/rap/rap.json.
func UserPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "rap", "rap.json"), nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot locate the user-level config: %w; set HOME or XDG_CONFIG_HOME", err)
		}
		home = h
	}
	return filepath.Join(home, ".config", "rap", "rap.json"), nil
}

// ProjectPath returns the project-level configuration file of dir:
// dir/.rap/rap.json.
func ProjectPath(dir string) string {
	return filepath.Join(dir, ".rap", "rap.json")
}

// LoadMerged loads the project-level file and then the user-level file,
// skipping either when it does not exist, and merges them with the project
// entries first (File.Merge). It returns the merged file and the paths that
// were read. A file that exists but cannot be parsed is an error.
func LoadMerged(projectPath, userPath string) (*File, []string, error) {
	merged := &File{}
	var used []string
	for _, p := range []string{projectPath, userPath} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			continue
		}
		f, err := LoadFile(p)
		if err != nil {
			return nil, used, err
		}
		merged.Merge(f)
		used = append(used, p)
	}
	return merged, used, nil
}
