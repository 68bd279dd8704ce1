// Package toolsjson loads Runloop agent bundles that declare host tools in
// a tools.json file, and serves those tools as a RAP tool server built with
// the rap SDK. See docs/toolsjson.md for the format as gorap
// implements it.
//
// A bundle is a directory holding tools.json, manifest.toml and, when any
// tool needs a capability, policy.caps: agents/<name>/ in a source tree,
// agent.bundle/ after packaging. Load checks everything before anything is
// served: the BLAKE3 digest pinned in manifest.toml, the document version,
// every tool entry (with the JSON path of each violation), the schema
// references, the names the tools get in RAP and the capability grants.
package toolsjson

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	"lukechampine.com/blake3"

	"github.com/gorap/gorap/rap"
)

// File names inside a bundle directory.
const (
	ToolsFile    = "tools.json"
	ManifestFile = "manifest.toml"
	PolicyFile   = "policy.caps"
	// SchemaDir holds shared schemas: schema:ID resolves to SchemaDir/ID.json.
	SchemaDir = "schemas"
)

// Version is the only tools.json version gorap accepts.
const Version = 1

// MaxToolsBytes bounds the size of tools.json, and of each schema file.
const MaxToolsBytes = 4 << 20

// Violation is one problem of a bundle, with the path of the offending part:
// a JSON path inside tools.json ("tools[2].transport.command"), or a file
// name ("manifest.toml: artifacts.tools.blake3"). It is the protocol's own
// violation type, so a bundle's problems and a manifest's print alike.
type Violation = rap.Violation

// BundleError lists every violation of a bundle that was refused. Nothing
// of a refused bundle is served.
type BundleError struct {
	// Dir is the bundle directory.
	Dir        string
	Violations []Violation
}

// Error lists the violations, one per line.
func (e *BundleError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bundle %s refused (%d problem", e.Dir, len(e.Violations))
	if len(e.Violations) != 1 {
		b.WriteString("s")
	}
	b.WriteString("); fix each one, nothing of the bundle is served until then:")
	for _, v := range e.Violations {
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}

// LoadOptions change how Load and Validate check a bundle; nil options
// mean the zero LoadOptions.
type LoadOptions struct {
	// AllowUnsigned accepts a tools.json whose digest is missing from
	// manifest.toml or differs from it. It is for development only; the
	// bundle's Warnings say so.
	AllowUnsigned bool
}

// Bundle is a loaded, valid bundle.
type Bundle struct {
	// Dir is the bundle directory.
	Dir string
	// Digest is the BLAKE3 digest of tools.json, 64 hex digits.
	Digest string
	// Tools are the tools whose capabilities are all granted, in file order.
	Tools []*Tool
	// Denied are the tools refused for a missing capability grant.
	Denied []Denial
	// Policy is the parsed policy.caps.
	Policy *Policy
	// Warnings are problems that did not refuse the bundle (an unsigned
	// bundle accepted with AllowUnsigned).
	Warnings []string
}

// Denial is a tool that is not exposed because policy.caps does not grant
// one of its capabilities.
type Denial struct {
	ToolID     string
	Path       string // "tools[3].capabilities[0]"
	Capability string
	Tags       []string
}

// Tool is one validated tool entry.
type Tool struct {
	// ID is the entry's id, as written (mail.smtp_send). Trace frames use it.
	ID string
	// Name is the RAP tool name derived from ID by RAPName.
	Name        string
	Description string
	Transport   Transport
	// InputSchema and ResultSchema are the resolved schemas.
	InputSchema  json.RawMessage
	ResultSchema json.RawMessage
	// InputRef and ResultRef are the schema:ID references as written, or
	// "inline".
	InputRef, ResultRef string
	Capabilities        []string
	Secrets             []string
	Budget              *Budget
	// RequiresConfirmation asks the user before each call.
	RequiresConfirmation bool
	Tags                 []string

	input, result *rap.Schema
}

// Transport says how a tool runs.
type Transport struct {
	// Kind is "exec" or "http".
	Kind string `json:"kind"`
	// Command is the absolute path of the program (exec).
	Command string `json:"command,omitempty"`
	// Args are appended after the input file's path (exec).
	Args []string `json:"args,omitempty"`
	// Method and URL say where an http tool sends its request; URL may hold
	// {field} templates filled from the input.
	Method string `json:"method,omitempty"`
	URL    string `json:"url,omitempty"`
	// Headers are static header values; "${secret:ID}" placeholders are
	// replaced by the secret's value.
	Headers map[string]string `json:"headers,omitempty"`
	// TimeoutMS bounds one call in milliseconds (a gorap extension); zero
	// means the server's default.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// Budget is a tool's budget hint.
type Budget struct {
	Tokens *int64   `json:"tokens,omitempty"`
	USD    *float64 `json:"usd,omitempty"`
}

// Digest returns the BLAKE3-256 digest of data as 64 lowercase hex digits.
func Digest(data []byte) string {
	sum := blake3.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ResolveDir returns the bundle directory of path: path itself when it is
// a directory, its parent when it names a tools.json file.
func ResolveDir(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("cannot read bundle %s: %w; give a bundle directory (agents/NAME or agent.bundle) or its tools.json", path, err)
	}
	if fi.IsDir() {
		return path, nil
	}
	return filepath.Dir(path), nil
}

// Load reads and checks the bundle at path (a directory or its tools.json).
// Any violation refuses the whole bundle with a *BundleError listing all
// of them. Tools needing a capability that policy.caps does not grant are
// left out and listed in Bundle.Denied; the rest is served. Nil options
// are the defaults (a signed bundle is required); Load does not change
// them.
func Load(path string, opts *LoadOptions) (*Bundle, error) {
	dir, err := ResolveDir(path)
	if err != nil {
		return nil, err
	}
	data, err := readLimited(filepath.Join(dir, ToolsFile))
	if err != nil {
		return nil, &BundleError{Dir: dir, Violations: []Violation{{Path: ToolsFile, Message: err.Error()}}}
	}
	var o LoadOptions
	if opts != nil {
		o = *opts
	}
	return readSiblings(dir).check(data, o)
}

// siblings are what a bundle's tools.json is checked against: the digest
// manifest.toml pins and policy.caps, read from the bundle directory.
type siblings struct {
	dir string
	// want is the pinned digest; manifestErr says why there is none.
	want        string
	manifestErr *Violation
	policy      *Policy
	policyErr   error
}

func readSiblings(dir string) *siblings {
	s := &siblings{dir: dir}
	s.want, s.manifestErr = manifestDigest(dir)
	s.policy, s.policyErr = LoadPolicy(filepath.Join(dir, PolicyFile))
	return s
}

// check checks tools.json's content data against the siblings; Load's
// rules, without reading a file.
func (s *siblings) check(data []byte, opts LoadOptions) (*Bundle, error) {
	dir := s.dir
	var vs []Violation
	b := &Bundle{Dir: dir, Digest: Digest(data)}

	// The digest pinned in manifest.toml.
	want, mv := s.want, s.manifestErr
	switch {
	case mv != nil && opts.AllowUnsigned:
		b.Warnings = append(b.Warnings, "UNSIGNED BUNDLE accepted because of --allow-unsigned (development only): "+mv.String())
	case mv != nil:
		vs = append(vs, *mv)
	case want != b.Digest && opts.AllowUnsigned:
		b.Warnings = append(b.Warnings, fmt.Sprintf("UNSIGNED BUNDLE accepted because of --allow-unsigned (development only): tools.json has BLAKE3 %s but manifest.toml pins %s", b.Digest, want))
	case want != b.Digest:
		vs = append(vs, Violation{Path: ManifestFile + ": artifacts.tools.blake3", Message: fmt.Sprintf(
			"tools.json was changed after signing: its BLAKE3 digest is %s but manifest.toml pins %s; if the change is yours, run 'rap toolsjson digest %s' and re-sign the bundle, otherwise do not use it",
			b.Digest, want, dir)})
	}

	policy := s.policy
	if s.policyErr != nil {
		vs = append(vs, Violation{Path: PolicyFile, Message: s.policyErr.Error()})
		policy = &Policy{}
	}
	b.Policy = policy

	tools, denied, tv := parseTools(data, dir, policy)
	vs = append(vs, tv...)
	if len(vs) > 0 {
		return nil, &BundleError{Dir: dir, Violations: vs}
	}
	b.Tools, b.Denied = tools, denied
	return b, nil
}

// manifestDigest returns the blake3 digest of [artifacts.tools] in
// manifest.toml, or a violation saying why there is none.
func manifestDigest(dir string) (string, *Violation) {
	p := filepath.Join(dir, ManifestFile)
	data, err := readLimited(p)
	if err != nil {
		return "", &Violation{Path: ManifestFile, Message: fmt.Sprintf("%v; a bundle is signed by the BLAKE3 digest of tools.json in manifest.toml: run 'rap toolsjson digest %s' to write it", err, dir)}
	}
	var m struct {
		Artifacts struct {
			Tools struct {
				Path   string `toml:"path"`
				Blake3 string `toml:"blake3"`
			} `toml:"tools"`
		} `toml:"artifacts"`
	}
	if _, err := toml.Decode(string(data), &m); err != nil {
		return "", &Violation{Path: ManifestFile, Message: fmt.Sprintf("is not valid TOML: %v", err)}
	}
	t := m.Artifacts.Tools
	if t.Path != "" && filepath.Clean(t.Path) != ToolsFile {
		return "", &Violation{Path: ManifestFile + ": artifacts.tools.path", Message: fmt.Sprintf("is %q; want %q", t.Path, ToolsFile)}
	}
	if t.Blake3 == "" {
		return "", &Violation{Path: ManifestFile + ": artifacts.tools.blake3", Message: fmt.Sprintf("missing: the bundle is unsigned; run 'rap toolsjson digest %s' to pin tools.json (BLAKE3 %s)", dir, digestOf(dir))}
	}
	if len(t.Blake3) != 64 || strings.Trim(strings.ToLower(t.Blake3), "0123456789abcdef") != "" {
		return "", &Violation{Path: ManifestFile + ": artifacts.tools.blake3", Message: fmt.Sprintf("%q is not 64 hex digits; run 'rap toolsjson digest %s' to rewrite it", t.Blake3, dir)}
	}
	return strings.ToLower(t.Blake3), nil
}

func digestOf(dir string) string {
	data, err := readLimited(filepath.Join(dir, ToolsFile))
	if err != nil {
		return "unknown"
	}
	return Digest(data)
}

func readLimited(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist", p)
		}
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxToolsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	if len(data) > MaxToolsBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, MaxToolsBytes)
	}
	return data, nil
}

// Validate checks the bundle at path like Load and returns every
// violation, denied capabilities included (as violations: "rap validate"
// reports them), and the warnings. Nil options are the defaults, as for
// Load.
func Validate(path string, opts *LoadOptions) ([]Violation, []string, error) {
	b, err := Load(path, opts)
	var be *BundleError
	if errors.As(err, &be) {
		return be.Violations, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var vs []Violation
	for _, d := range b.Denied {
		vs = append(vs, Violation{Path: d.Path, Message: fmt.Sprintf("capability %q of tool %q is not granted by policy.caps; add a grant line for it or the tool is not exposed", d.Capability, d.ToolID)})
	}
	return vs, b.Warnings, nil
}

// decodeStrict decodes data into v refusing unknown members.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
