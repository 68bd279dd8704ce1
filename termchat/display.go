package termchat

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
)

// Display says how the transcript draws what is not plain text.
type Display struct {
	// Color colours diffs (added lines green, removed red, hunks cyan).
	Color bool
	// ImageProtocol draws images in the terminal: "iterm" (iTerm2,
	// WezTerm) or "kitty"; "" prints a link to the image saved in
	// ImageDir.
	ImageProtocol string
	// ImageDir is where images are saved for their link; default a
	// rap-chat-images directory in the temporary directory.
	ImageDir string
}

// DetectDisplay picks the display for an output: colours when it is a
// terminal and NO_COLOR is not set, an image protocol when the terminal
// says it has one (TERM_PROGRAM iTerm.app or WezTerm, TERM xterm-kitty).
func DetectDisplay(getenv func(string) string, terminal bool) Display {
	var d Display
	if !terminal {
		return d
	}
	d.Color = getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
	switch {
	case getenv("TERM_PROGRAM") == "iTerm.app" || getenv("TERM_PROGRAM") == "WezTerm":
		d.ImageProtocol = "iterm"
	case getenv("TERM") == "xterm-kitty" || getenv("KITTY_WINDOW_ID") != "":
		d.ImageProtocol = "kitty"
	}
	return d
}

// ANSI colours of diff lines.
const (
	ansiGreen = "\x1b[32m"
	ansiRed   = "\x1b[31m"
	ansiCyan  = "\x1b[36m"
	ansiBold  = "\x1b[1m"
	ansiReset = "\x1b[0m"
)

// colorDiff colours the lines of a diff (already cleaned of escapes).
func (d Display) colorDiff(lines []string) []string {
	if !d.Color {
		return lines
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		switch {
		case i == 0 && strings.HasPrefix(l, "diff"), strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			out[i] = ansiBold + l + ansiReset
		case strings.HasPrefix(l, "+"):
			out[i] = ansiGreen + l + ansiReset
		case strings.HasPrefix(l, "-"):
			out[i] = ansiRed + l + ansiReset
		case strings.HasPrefix(l, "@@"):
			out[i] = ansiCyan + l + ansiReset
		default:
			out[i] = l
		}
	}
	return out
}

// resultText is what people see of a result, and which kind it is: the
// first display_as segment of a supported type (RAP RE-3: text, diff,
// image; unknown types are skipped), else the items of content, else text.
// An image is shown as a link to a saved copy, and drawn in the terminal
// when its protocol is known.
func (t *transcript) resultText(r api.ToolResult) (text, kind string) {
	for _, seg := range r.DisplayAs {
		if seg.Type == "image" {
			var im struct {
				Data      string `json:"data"`
				MediaType string `json:"mediaType"`
			}
			if json.Unmarshal(seg.Content, &im) == nil {
				return t.imageText(image{im.Data, im.MediaType}), "image"
			}
			continue
		}
		if s, ok := segmentText(seg); ok {
			return s, seg.Type
		}
	}
	if len(r.Content) > 0 {
		var parts []string
		for _, c := range r.Content {
			switch c.Type {
			case "text":
				parts = append(parts, c.Text)
			case "image":
				parts = append(parts, t.imageText(image{c.Data, c.MediaType}))
			}
		}
		return strings.Join(parts, "\n"), "content"
	}
	return r.Text, "text"
}

// segmentText renders a text or diff display segment, or reports that its
// type is not one of these (or its content is not what the type requires).
func segmentText(seg rap.DisplaySegment) (string, bool) {
	switch seg.Type {
	case "text":
		var s string
		if json.Unmarshal(seg.Content, &s) == nil {
			return s, true
		}
	case "diff":
		var d struct {
			Path  string `json:"path"`
			Patch string `json:"patch"`
		}
		if json.Unmarshal(seg.Content, &d) == nil && d.Patch != "" {
			head := "diff"
			if d.Path != "" {
				head += " " + d.Path
			}
			return head + "\n" + strings.TrimRight(d.Patch, "\n"), true
		}
	}
	return "", false
}

func orUnknown(mediaType string) string {
	if mediaType == "" {
		return "of unknown type"
	}
	return oneLine(clean(mediaType), 80)
}

// progressWidth is the width of a progress bar, in cells.
const progressWidth = 24

// viewLine is the one line of a view (RAP VU-1): a progress bar for a view
// whose content says how far a task is (pct, percent or progress from 0
// to 100 or 0 to 1; or done/current of total), else a summary.
func viewLine(viewType string, content json.RawMessage) string {
	name := oneLine(clean(viewType), 80)
	if frac, label, ok := progressOf(content); ok {
		n := int(frac*progressWidth + 0.5)
		bar := strings.Repeat("█", n) + strings.Repeat("░", progressWidth-n)
		line := fmt.Sprintf("%s [%s] %3.0f%%", name, bar, frac*100)
		if label != "" {
			line += " " + oneLine(clean(label), 80)
		}
		return line
	}
	return "view " + name + ": " + viewSummary(content)
}

// progressOf reads how far a task is from a view's content.
func progressOf(content json.RawMessage) (frac float64, label string, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(content, &m) != nil {
		return 0, "", false
	}
	num := func(keys ...string) (float64, bool) {
		for _, k := range keys {
			var f float64
			if v, ok := m[k]; ok && json.Unmarshal(v, &f) == nil {
				return f, true
			}
		}
		return 0, false
	}
	for _, k := range []string{"label", "message", "status", "step"} {
		if v, ok := m[k]; ok && json.Unmarshal(v, &label) == nil {
			break
		}
	}
	if total, ok := num("total", "of"); ok && total > 0 {
		if done, ok := num("done", "current", "completed", "value"); ok {
			return clamp01(done / total), label, true
		}
	}
	if p, ok := num("pct", "percent", "percentage"); ok {
		return clamp01(p / 100), label, true
	}
	if p, ok := num("progress", "fraction"); ok {
		if p > 1 {
			p /= 100
		}
		return clamp01(p), label, true
	}
	return 0, "", false
}

func clamp01(f float64) float64 { return max(0, min(1, f)) }

// viewSummary is a one-line summary of a view's content (RAP VU-1: an
// object the runtime does not interpret): its members in key order,
// nested values abbreviated.
func viewSummary(content json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(content, &m) != nil {
		return oneLine(clean(string(content)), maxViewSummary)
	}
	if len(m) == 0 {
		return "(empty)"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := m[k]
		var s string
		var arr []json.RawMessage
		var obj map[string]json.RawMessage
		switch {
		case json.Unmarshal(v, &s) == nil:
			s = strconv.Quote(oneLine(s, 60))
		case json.Unmarshal(v, &arr) == nil:
			s = fmt.Sprintf("[%d items]", len(arr))
		case json.Unmarshal(v, &obj) == nil:
			s = fmt.Sprintf("{%d members}", len(obj))
		default:
			s = string(v)
		}
		parts = append(parts, k+": "+s)
	}
	return oneLine(clean(strings.Join(parts, ", ")), maxViewSummary)
}
