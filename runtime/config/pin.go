package config

// This file owns the integrity pins of toolset_server entries (RAP TS-11):
// "sha256", the digest of the one discovery document the operator trusts,
// and "pin": "first_use", which trusts the document each session first
// discovers and refuses a different one later in that session.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gorap/gorap/rap"
)

// PinFirstUse is the "pin" value of a toolset_server entry whose discovery
// document is trusted on first use, per session.
const PinFirstUse = "first_use"

// checkPin checks the "sha256" and "pin" members of a toolset_server entry.
func checkPin(ts *ToolSet, name, path string) error {
	if ts.SHA256 != "" {
		ts.SHA256 = strings.ToLower(ts.SHA256)
		if !rap.IsToolsetDigest(ts.SHA256) {
			return &Error{File: name, Path: path + ".sha256", Problem: fmt.Sprintf("%q is not a SHA-256 digest; want 64 lowercase hex digits, as printed by 'rap validate %s'", ts.SHA256, orURL(ts.ServerURL))}
		}
	}
	switch ts.Pin {
	case "":
	case PinFirstUse:
		if ts.SHA256 != "" {
			return &Error{File: name, Path: path + ".pin", Problem: fmt.Sprintf("%q cannot be combined with \"sha256\", which already fixes the one trusted document; remove one of them", PinFirstUse)}
		}
	default:
		return &Error{File: name, Path: path + ".pin", Problem: fmt.Sprintf("%q is not a pin mode; want %q (trust the document each session first discovers), or drop \"pin\" and set \"sha256\" to trust one document", ts.Pin, PinFirstUse)}
	}
	return nil
}

func orURL(u string) string {
	if u == "" {
		return "URL"
	}
	return u
}

// refusePinOnOtherTypes rejects "sha256" and "pin" on entries other than
// toolset_server, which would otherwise be ignored and leave the operator
// believing the entry is verified.
func refusePinOnOtherTypes(item json.RawMessage, typ, name, path string) error {
	var e struct {
		SHA256 json.RawMessage `json:"sha256"`
		Pin    json.RawMessage `json:"pin"`
	}
	if json.Unmarshal(item, &e) != nil {
		return nil // the entry's own parser reports it
	}
	field := ""
	switch {
	case e.SHA256 != nil:
		field = "sha256"
	case e.Pin != nil:
		field = "pin"
	default:
		return nil
	}
	return &Error{File: name, Path: path + "." + field, Problem: fmt.Sprintf("only %q entries are pinned by %q; a %q entry is not verified this way, so remove it", TypeToolsetServer, field, typ)}
}

// ToolsetPin is the integrity pin of one toolset_server entry.
type ToolsetPin struct {
	// SHA256 is the pinned digest (rap.ToolsetDigest) of the discovery
	// document, or "".
	SHA256 string
	// FirstUse trusts the document a session first discovers and refuses
	// a different one later in that session.
	FirstUse bool
	// Source says where the pin is configured, such as
	// "/home/me/.config/rap/rap.json: tool_sets[0]".
	Source string
}

// ToolsetPins returns the pins of the toolset_server entries that have
// one, by base URL (as ServerURLs lists it). When two entries name one URL
// the first one's pin applies, as the first one's URL does.
func (f *File) ToolsetPins() map[string]ToolsetPin {
	pins := map[string]ToolsetPin{}
	seen := map[string]bool{}
	for _, ts := range f.ToolSets {
		if ts.Type != TypeToolsetServer {
			continue
		}
		u := strings.TrimRight(ts.ServerURL, "/")
		if seen[u] {
			continue
		}
		seen[u] = true
		if ts.SHA256 != "" || ts.Pin == PinFirstUse {
			pins[u] = ToolsetPin{SHA256: ts.SHA256, FirstUse: ts.Pin == PinFirstUse, Source: ts.Source}
		}
	}
	return pins
}
