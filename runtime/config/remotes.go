package config

// This file owns the "remotes" of a config file: other runtimes this one
// may move sessions to by name (rap migrate SESSION --to NAME, the web
// UI's "Move to…"), each with the environment variable that holds its
// client token, so that no token is written in the file.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Remote is one entry of "remotes".
type Remote struct {
	// URL is the other runtime's base URL.
	URL string `json:"url"`
	// TokenEnv names the environment variable holding its client token;
	// empty for a runtime without one.
	TokenEnv string `json:"token_env,omitempty"`
}

// remoteName is what a remote's name may be: it is typed on command
// lines and shown in menus.
var remoteName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// envName is what an environment variable's name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseRemotes reads a file's "remotes" object.
func parseRemotes(raw json.RawMessage, name string) (map[string]Remote, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var m map[string]Remote
	if err := dec.Decode(&m); err != nil {
		return nil, &Error{File: name, Path: "remotes", Problem: fmt.Sprintf(`%v; want {"NAME": {"url": "https://agents.example", "token_env": "RAP_REMOTE_TOKEN"}}`, err)}
	}
	for n, r := range m {
		path := "remotes." + n
		if !remoteName.MatchString(n) {
			return nil, &Error{File: name, Path: path, Problem: "a remote's name is letters, digits, '.', '_' and '-', up to 64, starting with a letter or digit"}
		}
		u, err := url.Parse(r.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &Error{File: name, Path: path + ".url", Problem: fmt.Sprintf("%q is not an http:// or https:// URL", r.URL)}
		}
		if r.TokenEnv != "" && !envName.MatchString(r.TokenEnv) {
			return nil, &Error{File: name, Path: path + ".token_env", Problem: fmt.Sprintf("%q is not the name of an environment variable; give the variable's name, not the token", r.TokenEnv)}
		}
		r.URL = strings.TrimRight(r.URL, "/")
		m[n] = r
	}
	return m, nil
}

// RemoteNames returns the names of the remotes, sorted.
func (f *File) RemoteNames() []string {
	if f == nil {
		return nil
	}
	names := make([]string, 0, len(f.Remotes))
	for n := range f.Remotes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ResolvedRemote is a remote with its token read from the environment.
type ResolvedRemote struct {
	URL, Token string
}

// ResolveRemotes reads each remote's token from its environment variable
// through getenv. A remote whose variable is unset or empty is an error
// that names both, so that a move never fails later for want of it.
func (f *File) ResolveRemotes(getenv func(string) string) (map[string]ResolvedRemote, error) {
	if f == nil {
		return nil, nil
	}
	out := make(map[string]ResolvedRemote, len(f.Remotes))
	for _, n := range f.RemoteNames() {
		r := f.Remotes[n]
		tok := ""
		if r.TokenEnv != "" {
			if tok = getenv(r.TokenEnv); tok == "" {
				return nil, fmt.Errorf("remote %q: its token variable %s is not set; set it to the client token of %s, or remove token_env if that runtime has none", n, r.TokenEnv, r.URL)
			}
		}
		out[n] = ResolvedRemote{URL: r.URL, Token: tok}
	}
	return out, nil
}
