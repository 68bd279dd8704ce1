package wiretest

import (
	"encoding/json"

	"github.com/gorap/gorap/model"
)

// Awkward returns msgs with characters that JSON encoders escape (or
// escape differently) added to every text, and call arguments with spaces
// to compact: byte-equality tests of request encoders run over it.
func Awkward(msgs []model.Message) []model.Message {
	const odd = " <b>&amp;\"quoted\" \\ tab\t line\n \u2028 é \x01"
	out := make([]model.Message, len(msgs))
	for i, m := range msgs {
		if m.Text != "" {
			m.Text += odd
		}
		var calls []model.ToolCall
		for _, c := range m.ToolCalls {
			c.Arguments = json.RawMessage(`{ "q" : "<x> & y" , "n": [1, 2] }`)
			calls = append(calls, c)
		}
		m.ToolCalls = calls
		var results []model.ToolResult
		for _, r := range m.ToolResults {
			r.Text += odd
			var parts []model.ContentPart
			for _, c := range r.Content {
				if c.Type == "text" {
					c.Text += odd
				}
				parts = append(parts, c)
			}
			r.Content = parts
			results = append(results, r)
		}
		m.ToolResults = results
		out[i] = m
	}
	return out
}
