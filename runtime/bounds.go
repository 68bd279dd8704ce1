package runtime

// This file owns the bounds on what a model request carries of the
// history: the model's context window (Config.ContextWindow, else what the
// provider declares or the model table says, else a default), the share
// of it one tool result may take (Config.MaxResultShare; arrange.go cuts
// a longer result with model.BoundResult) and how many images one request
// carries (Config.MaxImagesPerRequest, limitImages). The store keeps every
// result whole, and the client API shows it whole: only the model's view
// is bounded.

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/gorap/gorap/model"
)

// Defaults of the bounds on a model request.
const (
	// DefaultMaxResultShare is the share of the context window one tool
	// result may take in a model request when Config.MaxResultShare is
	// zero.
	DefaultMaxResultShare = 0.1
	// DefaultMaxImagesPerRequest is how many images, the newest, one model
	// request carries when Config.MaxImagesPerRequest is zero.
	DefaultMaxImagesPerRequest = 20
)

// modelView is how stored results are shown to the model. A cached
// arranged prefix (arrange.go) was made for one view and is used only for
// the same.
type modelView struct {
	images bool // image bytes are sent (RAP RE-2); else text placeholders
	// maxResultTokens bounds the estimated tokens of one result's text
	// (model.BoundResult); 0 bounds nothing.
	maxResultTokens int
}

// windowSource says where the runtime's context window came from, for
// the start-up log.
type windowSource string

const (
	windowConfigured windowSource = "configured"
	windowFromModel  windowSource = "model"
	windowDefault    windowSource = "default"
)

// resolveContextWindow returns the context window, in tokens, that
// bounds the requests to cfg.Model: cfg.ContextWindow when set, else what
// the provider declares or the model table gives
// (model.ProviderContextWindow), else model.DefaultContextWindow.
func resolveContextWindow(cfg *Config) (int, windowSource) {
	if cfg.ContextWindow > 0 {
		return cfg.ContextWindow, windowConfigured
	}
	if n, ok := model.ProviderContextWindow(cfg.Model); ok {
		return n, windowFromModel
	}
	return model.DefaultContextWindow, windowDefault
}

// checkBounds returns the problems of the bound settings of cfg.
func checkBounds(cfg *Config) []string {
	var problems []string
	if cfg.ContextWindow < 0 {
		problems = append(problems, fmt.Sprintf("ContextWindow is %d: must not be negative (0 takes the model's own)", cfg.ContextWindow))
	}
	if s := cfg.MaxResultShare; s < 0 || s > 1 || math.IsNaN(s) {
		problems = append(problems, fmt.Sprintf("MaxResultShare is %v: want a share of the context window above 0 and at most 1, such as 0.1 (0: the default, %v)", s, DefaultMaxResultShare))
	}
	return problems
}

// setBounds fills in r's bounds from its Config.
func (r *Runtime) setBounds() {
	r.window, r.windowFrom = resolveContextWindow(&r.cfg)
	share := r.cfg.MaxResultShare
	if share == 0 {
		share = DefaultMaxResultShare
	}
	r.maxResultTokens = max(1, int(float64(r.window)*share))
	r.maxImages = r.cfg.MaxImagesPerRequest
	if r.maxImages == 0 {
		r.maxImages = DefaultMaxImagesPerRequest
	}
}

// logContextWindow logs, at start, the window the requests are bounded
// by, and how to set it when the runtime had to assume one.
func (r *Runtime) logContextWindow() {
	if r.windowFrom == windowDefault {
		r.log.Info(unknownWindowMessage, "model", r.model.Name(), "context_window", r.window,
			"max_result_tokens", r.maxResultTokens, "max_images_per_request", r.maxImages)
		return
	}
	r.log.Info("model context window", "model", r.model.Name(), "context_window", r.window, "from", string(r.windowFrom),
		"max_result_tokens", r.maxResultTokens, "max_images_per_request", r.maxImages)
}

// unknownWindowMessage is the start-up log line of a runtime that knows
// nothing of its model's context window.
var unknownWindowMessage = fmt.Sprintf("the model's context window is unknown: tool results are bounded as for a window of %s tokens; "+
	"set the model's window with rap serve --context-window TOKENS (or RAP_CONTEXT_WINDOW, or \"context_window\" in rap.json; Config.ContextWindow in Go)",
	groupThousands(model.DefaultContextWindow))

// groupThousands writes n, not negative, with commas between groups of
// three digits: 1,234,567.
func groupThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// ContextWindow returns the context window, in tokens, the runtime bounds
// its model requests by (see Config.ContextWindow), and the most tokens
// one tool result may take in a request (Config.MaxResultShare of it).
func (r *Runtime) ContextWindow() (tokens, maxResultTokens int) {
	return r.window, r.maxResultTokens
}

// limitImages replaces, in msgs, every image of a tool result but the
// newest max (counted from the end of the conversation) by a text note,
// and returns how many it replaced; max < 0 keeps every image. The
// messages' results and content are copied before a change, never
// modified in place: they may be shared with the arranged prefix cached
// for the thread.
func limitImages(msgs []model.Message, max int) int {
	if max < 0 {
		return 0
	}
	seen, dropped := 0, 0
	for i := len(msgs) - 1; i >= 0; i-- {
		copiedResults := false
		for j := len(msgs[i].ToolResults) - 1; j >= 0; j-- {
			content := msgs[i].ToolResults[j].Content
			copiedContent := false
			for k := len(content) - 1; k >= 0; k-- {
				if content[k].Type != "image" {
					continue
				}
				if seen++; seen <= max {
					continue
				}
				if !copiedResults {
					msgs[i].ToolResults = slices.Clone(msgs[i].ToolResults)
					copiedResults = true
				}
				if !copiedContent {
					content = slices.Clone(content)
					msgs[i].ToolResults[j].Content = content
					copiedContent = true
				}
				content[k] = model.ContentPart{Type: "text", Text: imageLeftOutText(content[k].MediaType, max)}
				dropped++
			}
		}
	}
	return dropped
}

// imageLeftOutText is what the model sees in place of an image beyond
// the newest max of a request.
func imageLeftOutText(mediaType string, max int) string {
	return fmt.Sprintf("[image (%s) left out: %d images are sent at most per request, the newest ones; this one is kept in the thread's history]", mediaType, max)
}
