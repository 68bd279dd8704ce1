// Package otc bridges Open Tool Calling (OTC) tool servers into RAP.
//
// Two HTTP dialects of the Open Tool Calling RFC are spoken: Arcade's worker
// protocol (GET /worker/health, GET /worker/tools, POST /worker/tools/invoke,
// a bearer JWT signed HS256 with the worker secret; see
// libs/arcade-core/arcade_core/schema.py and libs/arcade-serve in
// github.com/ArcadeAI/arcade-mcp) and OXP 1.0 (GET /health, GET /tools,
// POST /tools/call; the openapi-1.0.json document). A Client talks to one
// worker; a Bridge serves its tools as a RAP tool server built with the rap
// SDK, so that a RAP runtime calls them asynchronously. With a durable
// Store (rap/durable) a Bridge resumes the calls it had accepted when it
// is restarted, killed or not (durable.go).
//
// The other way round, ServeOXP makes any rap.Server answer the OXP 1.0
// routes, so that an OXP client calls its tools.
//
// The mapping of every field, and what is not mapped, is in docs/otc.md.
package otc

import "encoding/json"

// Dialect names the HTTP dialect a worker speaks.
type Dialect string

const (
	// DialectArcade is Arcade's worker protocol (routes under /worker).
	DialectArcade Dialect = "arcade"
	// DialectOXP is the Open eXecution Protocol 1.0.
	DialectOXP Dialect = "oxp"
)

// ValueSchema is the OTC description of a value (arcade_core/schema.py
// ValueSchema).
type ValueSchema struct {
	ValType           string                  `json:"val_type"`
	InnerValType      *string                 `json:"inner_val_type,omitempty"`
	Enum              []string                `json:"enum,omitempty"`
	Properties        map[string]*ValueSchema `json:"properties,omitempty"`
	InnerProperties   map[string]*ValueSchema `json:"inner_properties,omitempty"`
	Description       *string                 `json:"description,omitempty"`
	RequiredKeys      []string                `json:"required_keys,omitempty"`
	InnerRequiredKeys []string                `json:"inner_required_keys,omitempty"`
	Nullable          *bool                   `json:"nullable,omitempty"`
}

// InputParameter is one parameter of an OTC tool (schema.py InputParameter).
type InputParameter struct {
	Name        string       `json:"name"`
	Required    bool         `json:"required"`
	Description *string      `json:"description,omitempty"`
	ValueSchema *ValueSchema `json:"value_schema"`
	// Inferrable defaults to true when absent.
	Inferrable *bool `json:"inferrable,omitempty"`
}

// ToolkitDefinition names the toolkit a tool belongs to.
type ToolkitDefinition struct {
	Name        string  `json:"name"`
	Description *string `json:"description,omitempty"`
	Version     *string `json:"version,omitempty"`
}

// SecretRequirement is one secret a tool needs. Arcade names it by "key",
// OXP by "id".
type SecretRequirement struct {
	Key string `json:"key,omitempty"`
	ID  string `json:"id,omitempty"`
}

// Name returns the secret's identifier in either dialect.
func (s SecretRequirement) Name() string {
	if s.Key != "" {
		return s.Key
	}
	return s.ID
}

// AuthRequirement is a tool's authorization requirement (Arcade
// ToolAuthRequirement; one item of OXP requirements.authorization).
type AuthRequirement struct {
	ProviderID   string          `json:"provider_id,omitempty"`
	ProviderType string          `json:"provider_type,omitempty"`
	ID           string          `json:"id,omitempty"`
	OAuth2       json.RawMessage `json:"oauth2,omitempty"`
}

// Provider returns the identifier a token for this requirement is kept
// under: id, else provider_id, else provider_type.
func (a AuthRequirement) Provider() string {
	switch {
	case a.ID != "":
		return a.ID
	case a.ProviderID != "":
		return a.ProviderID
	}
	return a.ProviderType
}

// ArcadeRequirements is an Arcade tool's requirements object.
type ArcadeRequirements struct {
	Authorization *AuthRequirement    `json:"authorization,omitempty"`
	Secrets       []SecretRequirement `json:"secrets,omitempty"`
	Metadata      json.RawMessage     `json:"metadata,omitempty"`
}

// ArcadeTool is one item of GET /worker/tools (schema.py ToolDefinition).
type ArcadeTool struct {
	Name               string            `json:"name"`
	FullyQualifiedName string            `json:"fully_qualified_name"`
	Description        string            `json:"description"`
	Toolkit            ToolkitDefinition `json:"toolkit"`
	Input              struct {
		Parameters []InputParameter `json:"parameters"`
	} `json:"input"`
	Output             json.RawMessage    `json:"output,omitempty"`
	Requirements       ArcadeRequirements `json:"requirements"`
	DeprecationMessage *string            `json:"deprecation_message,omitempty"`
}

// OXPRequirements is an OXP tool's requirements object.
type OXPRequirements struct {
	Authorization []AuthRequirement   `json:"authorization,omitempty"`
	Secrets       []SecretRequirement `json:"secrets,omitempty"`
	UserID        bool                `json:"user_id,omitempty"`
}

// OXPTool is one item of GET /tools (OXP ToolDefinition).
type OXPTool struct {
	ID           string           `json:"id"`
	Name         string           `json:"name"`
	Description  string           `json:"description"`
	Version      string           `json:"version"`
	InputSchema  json.RawMessage  `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage  `json:"output_schema,omitempty"`
	Requirements *OXPRequirements `json:"requirements,omitempty"`
}

// ToolError is the error of a failed call, in both dialects (Arcade
// ToolCallError, OXP ToolError).
type ToolError struct {
	Message                 string `json:"message"`
	Kind                    string `json:"kind,omitempty"`
	DeveloperMessage        string `json:"developer_message,omitempty"`
	CanRetry                bool   `json:"can_retry,omitempty"`
	AdditionalPromptContent string `json:"additional_prompt_content,omitempty"`
	RetryAfterMS            *int64 `json:"retry_after_ms,omitempty"`
}

// Artifact is the RFC's artifact response: a stored object the tool made.
type Artifact struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type,omitempty"`
	Size        int64  `json:"size,omitempty"`
	Meta        struct {
		Description string `json:"description,omitempty"`
	} `json:"meta,omitempty"`
}

// AuthChallenge asks the user to authorize before the tool can run. Arcade
// sends authorization_url/authorization_id/status (ToolCallRequiresAuthorization);
// OXP sends id/url/check_url (ToolAuthorizationChallenge).
type AuthChallenge struct {
	ID       string   `json:"id"`
	URL      string   `json:"url"`
	CheckURL string   `json:"check_url,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
	Status   string   `json:"status,omitempty"`
}

// Outcome is one worker response, normalised across dialects. Exactly one
// of Value (with HasValue), Error, Auth and Artifact is meaningful.
type Outcome struct {
	HasValue bool
	Value    json.RawMessage
	Error    *ToolError
	Auth     *AuthChallenge
	Artifact *Artifact
}

// CallRequest is what the bridge sends for one call, before dialect
// encoding.
type CallRequest struct {
	RunID       string
	ExecutionID string
	Toolkit     string
	Tool        string // the tool's own name (Arcade) or OXP id without version
	Version     string
	ToolID      string // OXP tool_id
	Inputs      json.RawMessage
	UserID      string
	Secrets     map[string]string
	// Tokens maps provider ids to authorization tokens.
	Tokens map[string]string
}
