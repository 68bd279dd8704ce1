package termchat

// This file owns what the chat says about the tokens a conversation
// cost: the /usage command (the thread's and the session's totals, from
// GET /v1/threads/{id}) with the session's budget and its tools' budgets,
// and, with --status, one line per completion from its "usage" event.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// tokenCount writes n in full, with thousands separators: 12,345.
func tokenCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// tokensText says a usage in one line: "12,345 in (10,000 cached, 500
// written to the cache), 1,234 out"; the cache's parts only when not zero.
func tokensText(u api.Usage) string {
	var cache []string
	if u.CachedInputTokens > 0 {
		cache = append(cache, tokenCount(u.CachedInputTokens)+" cached")
	}
	if u.CacheWriteInputTokens > 0 {
		cache = append(cache, tokenCount(u.CacheWriteInputTokens)+" written to the cache")
	}
	in := tokenCount(u.InputTokens) + " in"
	if len(cache) > 0 {
		in += " (" + strings.Join(cache, ", ") + ")"
	}
	return in + ", " + tokenCount(u.OutputTokens) + " out"
}

// noteUsage keeps a completion's usage (a "usage" event) to show under
// its turn, when the transcript shows status lines.
func (t *transcript) noteUsage(data json.RawMessage) {
	if !t.showStatus {
		return
	}
	var u api.Usage
	if json.Unmarshal(data, &u) == nil {
		t.usages = append(t.usages, u)
	}
}

// flushUsage prints the usage of the completions kept by noteUsage: after
// the turn they produced, or before the thread's next status line.
func (t *transcript) flushUsage() {
	for _, u := range t.usages {
		t.printf("  · tokens: %s\n", tokensText(u))
	}
	t.usages = nil
}

// injectedOnly reports whether an assistant message is only the
// runtime's carrier of an input (a subscription event, a child's report),
// saved with the turn that answers it, not the model's own words.
func injectedOnly(m api.Message) bool {
	if m.Text != "" || len(m.ToolCalls) == 0 {
		return false
	}
	for _, c := range m.ToolCalls {
		if c.Name != toolInjected {
			return false
		}
	}
	return true
}

// showUsage runs /usage: it prints the tokens of the chat's thread and of
// its whole session (the root thread and every thread under it), then
// the session's budget and the budget of each of its tools that has one.
func (s *session) showUsage(ctx context.Context) error {
	st, err := s.api.Status(ctx, s.threadID)
	var root *ThreadStatus
	if err == nil && st.ParentID != "" && st.RootID != "" {
		root, err = s.api.Status(ctx, st.RootID)
	}
	if _, moved := client.MovedTo(err); moved {
		return s.movedFailure(err)
	}
	if err != nil {
		s.say(s.opts.Stderr, "rap chat: /usage: %v\n", err)
		return nil
	}
	what, session, budgets, sessionBudget := "this thread alone", st.SessionUsage, st.Budgets, st.SessionBudget
	switch {
	case root != nil:
		what, session, budgets, sessionBudget = "root thread "+shortID(st.RootID)+" and its child threads", root.SessionUsage, root.Budgets, root.SessionBudget
	case len(st.Children) > 0:
		what = "this thread and its child threads"
	}
	text := fmt.Sprintf("  · tokens of this thread: %s\n  · tokens of the session (%s): %s\n",
		usageOrNone(st.Usage), what, usageOrNone(session))
	if st.Usage == nil && session == nil {
		text += "  · (the model reports no token usage, or no turn ran yet)\n"
	}
	if line := sessionBudgetText(sessionBudget); line != "" {
		text += "  · budget of the session: " + line + "\n"
	}
	for _, b := range budgets {
		if line := budgetText(b); line != "" {
			text += "  · budget of " + line + "\n"
		}
	}
	s.say(s.opts.Stdout, "%s", text)
	return nil
}

// usageOrNone says a total, or that there is none.
func usageOrNone(u *api.Usage) string {
	if u == nil {
		return "none reported"
	}
	return tokensText(*u)
}

// budgetText says what a tool spent of its budget in one line: "fetch:
// 512 of 200 tokens (over budget), $0.0123 of $0.50"; "" when it has no
// limit.
func budgetText(b api.Budget) string {
	parts := limitsText(b.TokensSpent, b.TokensLimit, b.USDSpent, b.USDLimit, b.Unpriced)
	if len(parts) == 0 {
		return ""
	}
	return b.Tool + ": " + strings.Join(parts, ", ")
}

// sessionBudgetText says what the session spent of its budget: "2,200
// of 2,000 tokens (over budget), $0.0123 of $5.00"; "" without one.
func sessionBudgetText(b *api.SessionBudget) string {
	if b == nil {
		return ""
	}
	return strings.Join(limitsText(b.TokensSpent, b.TokensLimit, b.USDSpent, b.USDLimit, b.Unpriced), ", ")
}

// limitsText says what was spent of each limit that is set, "(over
// budget)" once one is spent; unpriced notes that the dollars leave out
// completions of a model without a known price.
func limitsText(tokens, tokensLimit int64, usd, usdLimit float64, unpriced bool) []string {
	var parts []string
	if tokensLimit > 0 {
		p := tokenCount(tokens) + " of " + tokenCount(tokensLimit) + " tokens"
		if tokens >= tokensLimit {
			p += " (over budget)"
		}
		parts = append(parts, p)
	}
	if usdLimit > 0 {
		p := dollars(usd) + " of " + dollars(usdLimit)
		if usd >= usdLimit {
			p += " (over budget)"
		}
		if unpriced {
			p += " (not counting a model without a known price)"
		}
		parts = append(parts, p)
	}
	return parts
}

// dollars writes an amount of US dollars: in cents when that is exact,
// else to four decimals ($0.50, $0.0123).
func dollars(x float64) string {
	cents := math.Round(x * 100)
	if math.Abs(x*100-cents) < 1e-9 {
		return fmt.Sprintf("$%.2f", cents/100)
	}
	return fmt.Sprintf("$%.4f", x)
}
