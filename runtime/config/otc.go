package config

// The "otc_server" entry type, an Open Tool Calling worker served
// through gorap's OTC bridge (package bridge/otc):
//
//	{"type": "otc_server", "name": "arcade", "url": "http://127.0.0.1:8002",
//	 "dialect": "arcade", "secret_env": "ARCADE_WORKER_SECRET"}

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TypeOTCServer is an Open Tool Calling worker (Arcade worker protocol or
// OXP 1.0) that rap serve bridges into RAP.
const TypeOTCServer = "otc_server"

// OTCServer holds the members of an "otc_server" entry.
type OTCServer struct {
	// Name is the RAP toolset name of the bridged tools.
	Name string `json:"name"`
	// URL is the worker's base URL (without /worker or /tools).
	URL string `json:"url"`
	// Dialect is "arcade", "oxp", or "" to detect it from the health route
	// that answers.
	Dialect string `json:"dialect,omitempty"`
	// SecretEnv names the environment variable holding the worker secret
	// (default ARCADE_WORKER_SECRET). The secret itself never appears in the
	// file.
	SecretEnv string `json:"secret_env,omitempty"`
	// SecretFile is a file holding the worker secret instead; it must not be
	// readable by other users.
	SecretFile string `json:"secret_file,omitempty"`
	// NoAuth sends no worker JWT (for workers run with auth disabled).
	NoAuth bool `json:"no_auth,omitempty"`
	// SecretsDir holds one file per tool secret; tool secrets are otherwise
	// read from environment variables of the same name.
	SecretsDir string `json:"secrets_dir,omitempty"`
	// CallTimeout bounds one call to the worker, such as "2m" (default 5m).
	CallTimeout Duration `json:"call_timeout,omitempty"`
	// AuthTimeout bounds the wait for a user authorization (default 10m).
	AuthTimeout Duration `json:"auth_timeout,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("90s").
type Duration time.Duration

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`must be a duration string such as "90s" or "5m"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration such as \"90s\" or \"5m\"", s)
	}
	*d = Duration(v)
	return nil
}

// OTCServers returns the otc_server entries in order.
func (f *File) OTCServers() []*OTCServer {
	var out []*OTCServer
	for _, ts := range f.ToolSets {
		if ts.Type == TypeOTCServer && ts.OTC != nil {
			out = append(out, ts.OTC)
		}
	}
	return out
}

func parseOTCEntry(item json.RawMessage, name, path string) (ToolSet, error) {
	var o OTCServer
	dec := json.NewDecoder(bytes.NewReader(item))
	dec.DisallowUnknownFields()
	var withType struct {
		Type string `json:"type"`
		ID   string `json:"id,omitempty"`
		OTCServer
	}
	if err := dec.Decode(&withType); err != nil {
		return ToolSet{}, &Error{File: name, Path: path, Problem: strings.TrimPrefix(err.Error(), "json: ") + `; an otc_server entry has "name", "url", and optionally "dialect", "secret_env", "secret_file", "no_auth", "secrets_dir", "call_timeout", "auth_timeout"`}
	}
	o = withType.OTCServer
	if o.Name == "" {
		return ToolSet{}, &Error{File: name, Path: path + ".name", Problem: `missing; want the toolset name the worker's tools are served under, such as "arcade"`}
	}
	if err := checkServerURL(o.URL); err != nil {
		return ToolSet{}, &Error{File: name, Path: path + ".url", Problem: strings.ReplaceAll(err.Error(), "/.well-known/rap-toolset", "the OTC routes")}
	}
	if o.Dialect != "" && o.Dialect != "arcade" && o.Dialect != "oxp" {
		return ToolSet{}, &Error{File: name, Path: path + ".dialect", Problem: fmt.Sprintf("%q is not a dialect; want \"arcade\", \"oxp\", or leave it out to detect it", o.Dialect)}
	}
	o.URL = strings.TrimRight(o.URL, "/")
	src := name + ": " + path
	if name == "" {
		src = path
	}
	id := withType.ID
	if id == "" {
		id = "otc:" + o.Name
	}
	return ToolSet{Type: TypeOTCServer, ID: id, OTC: &o, Source: src}, nil
}
