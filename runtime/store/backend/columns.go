package backend

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// The JSON the stores keep in columns. Each such column has record types
// of its own, apart from package store's types and the /v1 API's, so
// that either can change without changing what is on disk, and each
// record says its format version ("v"). Records written before versions
// existed have none and read as version 1. A record of a version this
// program does not know is refused with a *FormatError naming the column
// and the version, never read as zero values.
//
// Version 1 of each record has the members earlier releases wrote, plus
// "v", which they ignore: rows written now read back the same in them.

// FormatVersion is the format version of the JSON records this program
// writes, and the newest it reads.
const FormatVersion = 1

// The columns holding versioned JSON, as errors name them.
const (
	ToolCallsColumn   = "messages.tool_calls"
	ToolResultsColumn = "messages.tool_results"
	ChoicesColumn     = "choices.choices"
	FieldsColumn      = "choices.fields"
	UsageColumn       = "messages.usage"
)

// FormatError reports JSON in a column whose format version this program
// does not read: a newer release wrote it.
type FormatError struct {
	// Column is the table and column, e.g. "messages.tool_calls".
	Column string
	// Version is the format version of the record.
	Version int
}

// Error names the column and the version, and what to do.
func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: stored JSON of format version %d, which this program does not read (it reads up to version %d): "+
		"a newer gorap wrote it; run that release or a later one on this store", e.Column, e.Version, FormatVersion)
}

// checkVersion accepts format version v of a record of column: the
// current one, or none (0: written before versions, which is version 1).
func checkVersion(column string, v int) error {
	if v == 0 || v == FormatVersion {
		return nil
	}
	return &FormatError{Column: column, Version: v}
}

// toolCallRecord is a store.ToolCall in the tool_calls column of a
// message, a JSON array of them.
type toolCallRecord struct {
	V         int             `json:"v"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Display   string          `json:"display,omitempty"`
}

// toolResultRecord is a store.ToolResult in the tool_results column of a
// message, a JSON array of them.
type toolResultRecord struct {
	V            int             `json:"v"`
	CallID       string          `json:"call_id"`
	Name         string          `json:"name,omitempty"`
	Text         string          `json:"text,omitempty"`
	Content      []contentRecord `json:"content,omitempty"`
	DisplayAs    []displayRecord `json:"display_as,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	Subscription bool            `json:"subscription,omitempty"`
}

// contentRecord is a rap.ContentItem of a tool result.
type contentRecord struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Data      string `json:"data,omitempty"`
	MediaType string `json:"mediaType,omitempty"`
}

// displayRecord is a rap.DisplaySegment of a tool result.
type displayRecord struct {
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content"`
}

// usageRecord is a store.Usage in the usage column of a message.
type usageRecord struct {
	V                     int    `json:"v"`
	InputTokens           int64  `json:"input_tokens"`
	CachedInputTokens     int64  `json:"cached_input_tokens,omitempty"`
	CacheWriteInputTokens int64  `json:"cache_write_input_tokens,omitempty"`
	OutputTokens          int64  `json:"output_tokens"`
	Model                 string `json:"model,omitempty"`
}

// EncodeUsage returns the usage column for u: nil when u is nil.
func EncodeUsage(u *store.Usage) ([]byte, error) {
	if u == nil {
		return nil, nil
	}
	return json.Marshal(usageRecord{V: FormatVersion, InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens,
		CacheWriteInputTokens: u.CacheWriteInputTokens, OutputTokens: u.OutputTokens, Model: u.Model})
}

// DecodeUsage reads a usage column: nil for NULL.
func DecodeUsage(b []byte) (*store.Usage, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var rec usageRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", UsageColumn, err)
	}
	if err := checkVersion(UsageColumn, rec.V); err != nil {
		return nil, err
	}
	return &store.Usage{InputTokens: rec.InputTokens, CachedInputTokens: rec.CachedInputTokens,
		CacheWriteInputTokens: rec.CacheWriteInputTokens, OutputTokens: rec.OutputTokens, Model: rec.Model}, nil
}

// EncodeMessage returns the tool_calls and tool_results columns of m,
// each nil when m has none.
func EncodeMessage(m store.Message) (calls, results []byte, err error) {
	if calls, err = EncodeToolCalls(m.ToolCalls); err != nil {
		return nil, nil, err
	}
	if results, err = EncodeToolResults(m.ToolResults); err != nil {
		return nil, nil, err
	}
	return calls, results, nil
}

// DecodeMessage sets m's ToolCalls and ToolResults from its tool_calls and
// tool_results columns, nil for NULL.
func DecodeMessage(m *store.Message, calls, results []byte) error {
	var err error
	if m.ToolCalls, err = DecodeToolCalls(calls); err != nil {
		return err
	}
	m.ToolResults, err = DecodeToolResults(results)
	return err
}

// EncodeToolCalls returns the tool_calls column for calls: nil when there
// are none.
func EncodeToolCalls(calls []store.ToolCall) ([]byte, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	recs := make([]toolCallRecord, len(calls))
	for i, c := range calls {
		recs[i] = toolCallRecord{V: FormatVersion, ID: c.ID, Name: c.Name, Arguments: c.Arguments, Display: c.Display}
	}
	b, err := json.Marshal(recs)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", ToolCallsColumn, err)
	}
	return b, nil
}

// DecodeToolCalls reads a tool_calls column; nil (NULL) is no calls.
func DecodeToolCalls(b []byte) ([]store.ToolCall, error) {
	if b == nil {
		return nil, nil
	}
	var recs []toolCallRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("%s: %w", ToolCallsColumn, err)
	}
	if recs == nil {
		return nil, nil
	}
	out := make([]store.ToolCall, len(recs))
	for i, r := range recs {
		if err := checkVersion(ToolCallsColumn, r.V); err != nil {
			return nil, err
		}
		out[i] = store.ToolCall{ID: r.ID, Name: r.Name, Arguments: r.Arguments, Display: r.Display}
	}
	return out, nil
}

// EncodeToolResults returns the tool_results column for results: nil when
// there are none.
func EncodeToolResults(results []store.ToolResult) ([]byte, error) {
	if len(results) == 0 {
		return nil, nil
	}
	recs := make([]toolResultRecord, len(results))
	for i, r := range results {
		rec := toolResultRecord{V: FormatVersion, CallID: r.CallID, Name: r.Name, Text: r.Text, IsError: r.IsError, Subscription: r.Subscription}
		if r.Content != nil {
			rec.Content = make([]contentRecord, len(r.Content))
			for j, c := range r.Content {
				rec.Content[j] = contentRecord{Type: c.Type, Text: c.Text, Data: c.Data, MediaType: c.MediaType}
			}
		}
		if r.DisplayAs != nil {
			rec.DisplayAs = make([]displayRecord, len(r.DisplayAs))
			for j, d := range r.DisplayAs {
				rec.DisplayAs[j] = displayRecord{Type: d.Type, Content: d.Content}
			}
		}
		recs[i] = rec
	}
	b, err := json.Marshal(recs)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", ToolResultsColumn, err)
	}
	return b, nil
}

// DecodeToolResults reads a tool_results column; nil (NULL) is no
// results.
func DecodeToolResults(b []byte) ([]store.ToolResult, error) {
	if b == nil {
		return nil, nil
	}
	var recs []toolResultRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("%s: %w", ToolResultsColumn, err)
	}
	if recs == nil {
		return nil, nil
	}
	out := make([]store.ToolResult, len(recs))
	for i, r := range recs {
		if err := checkVersion(ToolResultsColumn, r.V); err != nil {
			return nil, err
		}
		res := store.ToolResult{CallID: r.CallID, Name: r.Name, Text: r.Text, IsError: r.IsError, Subscription: r.Subscription}
		if r.Content != nil {
			res.Content = make([]rap.ContentItem, len(r.Content))
			for j, c := range r.Content {
				res.Content[j] = rap.ContentItem{Type: c.Type, Text: c.Text, Data: c.Data, MediaType: c.MediaType}
			}
		}
		if r.DisplayAs != nil {
			res.DisplayAs = make([]rap.DisplaySegment, len(r.DisplayAs))
			for j, d := range r.DisplayAs {
				res.DisplayAs[j] = rap.DisplaySegment{Type: d.Type, Content: d.Content}
			}
		}
		out[i] = res
	}
	return out, nil
}

// choicesRecord is the form a later version of the choices column takes:
// an object with its version. Version 1, what every release so far has
// written, is the bare JSON array of the choices, which a release before
// versions can read too; it stays the form written while the format is
// version 1.
type choicesRecord struct {
	V       int      `json:"v"`
	Choices []string `json:"choices"`
}

// EncodeChoices returns the choices column of a user choice: version 1,
// the JSON array of its choices.
func EncodeChoices(choices []string) ([]byte, error) {
	b, err := json.Marshal(choices)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", ChoicesColumn, err)
	}
	return b, nil
}

// DecodeChoices reads a choices column: a JSON array (version 1), or an
// object with a format version ("v"), refused with a *FormatError unless
// this program reads that version.
func DecodeChoices(b []byte) ([]string, error) {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		var rec choicesRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("%s: %w", ChoicesColumn, err)
		}
		if err := checkVersion(ChoicesColumn, rec.V); err != nil {
			return nil, err
		}
		return rec.Choices, nil
	}
	var choices []string
	if err := json.Unmarshal(b, &choices); err != nil {
		return nil, fmt.Errorf("%s: %w", ChoicesColumn, err)
	}
	return choices, nil
}

// inputFieldsRecord is the fields column of a user input: its form, the
// JSON array of rap.InputField, with the record's version.
type inputFieldsRecord struct {
	V      int             `json:"v"`
	Fields json.RawMessage `json:"fields"`
}

// EncodeInputFields returns the fields column of a user input, or nil
// (NULL) for a user choice, whose fields are nil.
func EncodeInputFields(fields json.RawMessage) ([]byte, error) {
	if fields == nil {
		return nil, nil
	}
	if !json.Valid(fields) {
		return nil, fmt.Errorf("encode %s: the fields are not valid JSON", FieldsColumn)
	}
	return json.Marshal(inputFieldsRecord{V: FormatVersion, Fields: fields})
}

// DecodeInputFields reads a fields column, refused with a *FormatError
// unless this program reads its version.
func DecodeInputFields(b []byte) (json.RawMessage, error) {
	var rec inputFieldsRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", FieldsColumn, err)
	}
	if err := checkVersion(FieldsColumn, rec.V); err != nil {
		return nil, err
	}
	if len(rec.Fields) == 0 {
		return nil, fmt.Errorf("%s: the record has no fields", FieldsColumn)
	}
	return rec.Fields, nil
}
