package conformance

// What the checks judge messages by: the shape and routing of a result,
// arguments a schema refuses, whether a text reads as an error.

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"sort"
	"strings"
)

// resultProblems says what is wrong with a callback meant as the result
// of inv, or "".
func resultProblems(rec received, inv map[string]any) string {
	var p []string
	if mt, _, err := mime.ParseMediaType(rec.header.Get("Content-Type")); err != nil || mt != "application/json" {
		p = append(p, fmt.Sprintf("Content-Type is %q, not application/json", rec.header.Get("Content-Type")))
	}
	if rec.msg == nil {
		if rec.tooBig {
			return fmt.Sprintf("the body is over %d bytes", MaxCallbackBytes)
		}
		return fmt.Sprintf("the body is not a JSON object: %v", rec.decErr)
	}
	m := rec.msg
	if m["type"] != "tool_result" {
		p = append(p, fmt.Sprintf(`"type" is %s, not "tool_result"`, jsonText(m["type"])))
	}
	if m["group_id"] != inv["group_id"] {
		p = append(p, fmt.Sprintf(`"group_id" is %s, not the invocation's %s`, jsonText(m["group_id"]), jsonText(inv["group_id"])))
	}
	if m["id"] != inv["id"] {
		p = append(p, fmt.Sprintf(`"id" is %s, not the invocation's %s`, jsonText(m["id"]), jsonText(inv["id"])))
	}
	_, hasText := m["text"].(string)
	content, hasContent := m["content"].([]any)
	if !hasText && !hasContent {
		p = append(p, `neither "text" (a string) nor "content" (an array) is present`)
	}
	for i, it := range content {
		o, _ := it.(map[string]any)
		switch o["type"] {
		case "text":
			if _, ok := o["text"].(string); !ok {
				p = append(p, fmt.Sprintf("content[%d]: a text item without a text string", i))
			}
		case "image":
			_, d := o["data"].(string)
			_, mtp := o["mediaType"].(string)
			if !d || !mtp {
				p = append(p, fmt.Sprintf("content[%d]: an image item needs data and mediaType strings", i))
			}
		default:
			p = append(p, fmt.Sprintf("content[%d]: type %s is neither text nor image", i, jsonText(o["type"])))
		}
	}
	if v, present := m["subscription"]; present {
		if _, ok := v.(bool); !ok {
			p = append(p, `"subscription" is not a boolean`)
		}
	}
	if v, present := m["display_as"]; present && v != nil {
		if _, ok := v.([]any); !ok {
			p = append(p, `"display_as" is not an array`)
		}
	}
	return strings.Join(p, "; ")
}

// routeProblems says what is wrong with where a result is routed: its
// type, group_id and id.
func routeProblems(rec received, inv map[string]any) string {
	if rec.msg == nil {
		return fmt.Sprintf("the body is not a JSON object: %v", rec.decErr)
	}
	var p []string
	if rec.msg["type"] != "tool_result" {
		p = append(p, fmt.Sprintf(`"type" is %s, not "tool_result"`, jsonText(rec.msg["type"])))
	}
	if rec.msg["group_id"] != inv["group_id"] {
		p = append(p, fmt.Sprintf(`"group_id" is %s, not the invocation's %s`, jsonText(rec.msg["group_id"]), jsonText(inv["group_id"])))
	}
	if rec.msg["id"] != inv["id"] {
		p = append(p, fmt.Sprintf(`"id" is %s, not the invocation's %s`, jsonText(rec.msg["id"]), jsonText(inv["id"])))
	}
	return strings.Join(p, "; ")
}

// invalidArgs returns arguments that the schema refuses, and how, or nil.
func invalidArgs(schema map[string]any) (json.RawMessage, string) {
	if req, _ := schema["required"].([]any); len(req) > 0 {
		return json.RawMessage(`{}`), fmt.Sprintf("the required argument %s missing", jsonText(req[0]))
	}
	props, _ := schema["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ps, _ := props[name].(map[string]any)
		ty, _ := ps["type"].(string)
		var bad any
		switch ty {
		case "string":
			bad = 12345
		case "integer", "number", "boolean", "array", "object":
			bad = "conformance: not a " + ty
		default:
			continue
		}
		b, _ := json.Marshal(map[string]any{name: bad})
		return b, fmt.Sprintf("argument %q of the wrong type", name)
	}
	if ap, ok := schema["additionalProperties"].(bool); ok && !ap {
		return json.RawMessage(`{"conformance_unexpected_argument":1}`), "an argument the schema does not allow"
	}
	return nil, ""
}

// stillServing fails the check unless the server still answers discovery.
func (r *toolRun) stillServing(t *T) {
	resp, _ := r.fetchDiscovery(t)
	if resp.StatusCode != http.StatusOK {
		t.Failf("the server no longer serves: discovery now answers %d", resp.StatusCode)
	}
}

// looksLikeError reports whether a result's text says the call failed:
// it starts with "error" in any case, or mentions an error, an unknown or
// invalid thing. RAP RE-4's exact form is checked by
// tool.result.error-prefix.
func looksLikeError(text string) bool {
	l := strings.ToLower(strings.TrimSpace(text))
	for _, w := range []string{"error", "unknown", "invalid", "not found", "no such", "failed"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// nonSubscriptionCalls returns the allowed calls that did not start a
// subscription, the good call first; r.mu is held.
func (r *toolRun) nonSubscriptionCalls() []allowedCall {
	var out []allowedCall
	if r.good != nil {
		out = append(out, *r.good)
	}
	for _, c := range r.calls {
		sub := false
		for _, sc := range r.subs {
			sub = sub || sc.call.Tool == c.Tool
		}
		if !sub && (r.good == nil || c.Tool != r.good.Tool) {
			out = append(out, c)
		}
	}
	return out
}
