package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
)

// parseToolsJSONEntry parses a {"type": "tools_json", "bundle": PATH}
// entry. A relative bundle path is resolved against the
// directory of the config file.
func parseToolsJSONEntry(item json.RawMessage, name, path string) (ToolSet, error) {
	var e struct {
		Type          string `json:"type"`
		Bundle        any    `json:"bundle"`
		ID            string `json:"id"`
		AllowUnsigned bool   `json:"allow_unsigned"`
	}
	if err := json.Unmarshal(item, &e); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return ToolSet{}, &Error{File: name, Path: path + "." + ute.Field, Problem: fmt.Sprintf("is a JSON %s; want a %s", ute.Value, ute.Type)}
		}
		return ToolSet{}, &Error{File: name, Path: path, Problem: err.Error()}
	}
	bundle, ok := e.Bundle.(string)
	if !ok || bundle == "" {
		return ToolSet{}, &Error{File: name, Path: path + ".bundle", Problem: `missing or not a string; want the bundle directory, such as "agents/mail" (see docs/toolsjson.md)`}
	}
	if !filepath.IsAbs(bundle) && name != "" {
		bundle = filepath.Join(filepath.Dir(name), bundle)
	}
	ts := ToolSet{Type: TypeToolsJSON, Bundle: bundle, ID: e.ID, AllowUnsigned: e.AllowUnsigned, Source: name + ": " + path}
	if name == "" {
		ts.Source = path
	}
	return ts, nil
}

// ToolsJSONEntries returns the tools_json entries, in order.
func (f *File) ToolsJSONEntries() []ToolSet {
	var out []ToolSet
	for _, ts := range f.ToolSets {
		if ts.Type == TypeToolsJSON {
			out = append(out, ts)
		}
	}
	return out
}
