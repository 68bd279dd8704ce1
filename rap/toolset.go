package rap

import (
	"encoding/json"
)

// WellKnownPath is the discovery path appended to a tool server's base URL
// (RAP TS-4).
const WellKnownPath = "/.well-known/rap-toolset"

// Toolset is the manifest a tool server serves at WellKnownPath (RAP TS-1).
type Toolset struct {
	// Name identifies the toolset: 1 to 128 characters.
	Name string `json:"name"`
	// Description says what the toolset is for.
	Description string `json:"description,omitempty"`
	// Endpoint is the URL invocations are POSTed to.
	Endpoint string `json:"endpoint"`
	// Tools lists the operations; there is at least one.
	Tools []Tool `json:"tools"`
	// NeedsMigration says the server implements POST /migrate (RAP MI-1).
	NeedsMigration bool `json:"needsMigration,omitempty"`
}

// Tool describes one operation of a toolset (RAP TS-2).
type Tool struct {
	// Name is sent as the invocation's operation.
	Name string `json:"name"`
	// Description is shown to the model. It is untrusted (RAP TS-9).
	Description string `json:"description"`
	// InputSchema is the JSON Schema of the arguments object.
	InputSchema json.RawMessage `json:"inputSchema"`
	// Annotations describe the tool's behaviour; they are informational.
	Annotations *Annotations `json:"annotations,omitempty"`
	// DisplayScript is a Rhai script that renders a call for people (RAP DS-1).
	DisplayScript string `json:"displayScript,omitempty"`
}

// Annotations are the optional behaviour hints of a tool (RAP TS-3).
type Annotations struct {
	// RequiresAuth names the auth provider the tool may start an OAuth flow for.
	RequiresAuth string `json:"requiresAuth,omitempty"`
	// ReadOnly says the tool changes no external state.
	ReadOnly bool `json:"readOnly,omitempty"`
	// Destructive says the tool may delete or overwrite; a runtime should ask
	// the user before running it.
	Destructive bool `json:"destructive,omitempty"`
	// Idempotent says repeating a call has no further effect.
	Idempotent bool `json:"idempotent,omitempty"`
	// LongRunning says a call may take minutes or hours.
	LongRunning bool `json:"longRunning,omitempty"`
	// Custom holds namespaced custom annotations such as "x-acme-priority".
	Custom map[string]json.RawMessage `json:"-"`
}

var knownAnnotations = map[string]bool{
	"requiresAuth": true, "readOnly": true, "destructive": true, "idempotent": true, "longRunning": true,
}

// MarshalJSON writes the known annotations and every custom one.
func (a Annotations) MarshalJSON() ([]byte, error) {
	type plain Annotations
	b, err := json.Marshal(plain(a))
	if err != nil || len(a.Custom) == 0 {
		return b, err
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range a.Custom {
		if !knownAnnotations[k] {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads the known annotations and keeps the others in Custom.
func (a *Annotations) UnmarshalJSON(data []byte) error {
	type plain Annotations
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*a = Annotations(p)
	for k, v := range m {
		if !knownAnnotations[k] {
			if a.Custom == nil {
				a.Custom = map[string]json.RawMessage{}
			}
			a.Custom[k] = v
		}
	}
	return nil
}

// EmptyObjectSchema is the input schema of a tool without parameters
// (RAP TS-8).
var EmptyObjectSchema = json.RawMessage(`{"type":"object","additionalProperties":false}`)
