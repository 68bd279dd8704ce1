package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// EnvEmbedded is set to "1" in the environment of every toolset_command
// program: it tells a RAP server written for the reference runtime to
// listen on a free port and print {"port": N} on its first line of
// standard output.
const EnvEmbedded = "RAP_EMBEDDED"

// ToolsetCommand is the command part of a toolset_command entry (RAP
// CF-1): "rap serve" runs the program, reads the port it prints and uses
// it as a RAP tool server. See docs/config.md.
type ToolsetCommand struct {
	// Name names the entry in log lines and messages: the entry's name,
	// else its id, else the program's base name.
	Name string
	// Argv is the program and its arguments. It is run directly, without
	// a shell.
	Argv []string
	// Env holds extra environment variables for the program, on top of
	// the environment of "rap serve".
	Env map[string]string
}

// shellChars are characters whose meaning in the reference runtime's
// string commands (run with "sh -c") gorap does not reproduce.
const shellChars = "\"'`$\\|&;<>(){}*?[]~#\n"

// parseCommandEntry parses a toolset_command entry. command is an array
// (the program and its arguments) or, as in the reference runtime's files,
// a string, which is split at spaces when it uses no shell syntax.
func parseCommandEntry(item json.RawMessage, name, path string) (ToolSet, error) {
	var raw struct {
		Type    string            `json:"type"`
		ID      string            `json:"id,omitempty"`
		Name    string            `json:"name,omitempty"`
		Command json.RawMessage   `json:"command"`
		Env     map[string]string `json:"env,omitempty"`
		// Installation bookkeeping of the reference runtime; accepted
		// and ignored.
		CrateName string `json:"crate_name,omitempty"`
		Git       string `json:"git,omitempty"`
		Path      string `json:"path,omitempty"`
	}
	fail := func(field, problem string) (ToolSet, error) {
		p := path
		if field != "" {
			p += "." + field
		}
		return ToolSet{}, &Error{File: name, Path: p, Problem: problem}
	}
	dec := json.NewDecoder(bytes.NewReader(item))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return fail(ute.Field, fmt.Sprintf("is a JSON %s; want %s", ute.Value, describeType(ute.Type.String())))
		}
		return fail("", err.Error()+`; a toolset_command entry has command, and optionally env, name, id`)
	}
	var argv []string
	trimmed := bytes.TrimSpace(raw.Command)
	switch {
	case len(trimmed) == 0 || string(trimmed) == "null":
		return fail("command", `missing; want the server's program and arguments, such as ["rap", "example", "get-time"]`)
	case trimmed[0] == '"':
		var s string
		if err := json.Unmarshal(trimmed, &s); err != nil {
			return fail("command", err.Error())
		}
		if i := strings.IndexAny(s, shellChars); i >= 0 {
			return fail("command", fmt.Sprintf("%q uses shell syntax (%q), and gorap runs programs without a shell; write the program and its arguments as an array, such as [\"my-server\", \"--flag\"], or wrap it yourself: [\"sh\", \"-c\", \"...\"]", s, string(s[i])))
		}
		argv = strings.Fields(s)
	case trimmed[0] == '[':
		if err := json.Unmarshal(trimmed, &argv); err != nil {
			return fail("command", "must be an array of strings, such as [\"rap\", \"example\", \"get-time\"]")
		}
	default:
		return fail("command", "must be an array of strings (the program and its arguments) or a string")
	}
	if len(argv) == 0 || strings.TrimSpace(argv[0]) == "" {
		return fail("command", `is empty; want the server's program and arguments, such as ["rap", "example", "get-time"]`)
	}
	for k := range raw.Env {
		if k == "" || strings.Contains(k, "=") {
			return fail("env", fmt.Sprintf("has the invalid variable name %q", k))
		}
	}
	label := raw.Name
	if label == "" {
		label = raw.ID
	}
	if label == "" {
		label = filepath.Base(argv[0])
	}
	ts := ToolSet{Type: TypeToolsetCommand, ID: raw.ID, Command: &ToolsetCommand{Name: label, Argv: argv, Env: raw.Env}, Source: name + ": " + path}
	if name == "" {
		ts.Source = path
	}
	return ts, nil
}

// Commands returns the toolset_command entries in order.
func (f *File) Commands() []ToolSet {
	var out []ToolSet
	for _, ts := range f.ToolSets {
		if ts.Command != nil {
			out = append(out, ts)
		}
	}
	return out
}
