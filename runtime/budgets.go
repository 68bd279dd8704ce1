package runtime

// This file owns the budgets of tools (seed 002: "per-tool budget hints
// enforced by the runtime"): a tool whose definition carries the
// annotation x-runloop-budget {"tokens": N, "usd": X} (the tools.json
// bridge publishes a bundle's budget so) may add at most N tokens of
// results to a session, and its calls may be attributed at most X US
// dollars of model spend: each turn that called it counts the cost of
// its completion (at the runtime's prices, Config.Prices), shared equally
// among the turn's calls. A call past a budget is not dispatched: the
// model gets an error result naming the budget and what was spent.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// AnnotationBudget is the custom tool annotation carrying a tool's budget
// per session.
const AnnotationBudget = "x-runloop-budget"

// toolBudget is a tool's budget per session; a nil field is no limit.
type toolBudget struct {
	Tokens *int64   `json:"tokens"`
	USD    *float64 `json:"usd"`
}

// budgetOf returns the tool's budget, or nil when it has none (or an
// unreadable one, which limits nothing).
func budgetOf(t *rap.ResolvedTool) *toolBudget {
	if t == nil || t.Tool.Annotations == nil {
		return nil
	}
	raw, ok := t.Tool.Annotations.Custom[AnnotationBudget]
	if !ok {
		return nil
	}
	var b toolBudget
	if json.Unmarshal(raw, &b) != nil || (b.Tokens == nil && b.USD == nil) {
		return nil
	}
	return &b
}

// budgetSpend is what a tool used in one session.
type budgetSpend struct {
	tokens int64
	usd    float64
	// priced is false when a turn that called the tool had usage of a
	// model without a known price: its spend is not counted.
	priced bool
}

// spentBy sums what the tool used in the session of root: the estimated
// tokens of its results, and its share of the cost of the turns that
// called it.
func (r *Runtime) spentBy(ctx context.Context, root, toolName string) (budgetSpend, error) {
	spend := budgetSpend{priced: true}
	err := r.store.View(ctx, func(tx store.Tx) error {
		threads, err := tx.SessionThreads(root)
		if err != nil {
			return err
		}
		for _, th := range threads {
			own, err := tx.HistorySince(th.ID, th.InheritSeq)
			if err != nil {
				return err
			}
			for _, m := range own {
				for _, res := range m.ToolResults {
					if res.Name != toolName {
						continue
					}
					spend.tokens += int64(model.EstimateTokens(res.Text))
					for _, c := range res.Content {
						spend.tokens += int64(model.EstimateTokens(c.Text))
					}
				}
				if m.Usage == nil || len(m.ToolCalls) == 0 {
					continue
				}
				n := 0
				for _, c := range m.ToolCalls {
					if c.Name == toolName {
						n++
					}
				}
				if n == 0 {
					continue
				}
				price, ok := r.prices.Of(m.Usage.Model)
				if !ok {
					spend.priced = false
					continue
				}
				cost := price.Cost(model.Usage{InputTokens: m.Usage.InputTokens, CachedInputTokens: m.Usage.CachedInputTokens,
					CacheWriteInputTokens: m.Usage.CacheWriteInputTokens, OutputTokens: m.Usage.OutputTokens})
				spend.usd += cost * float64(n) / float64(len(m.ToolCalls))
			}
		}
		return nil
	})
	return spend, err
}

// ToolBudget is the budget per session of each tool of a toolset whose
// definition carries none of its own (Config.ToolsetBudgets); a zero
// field is no limit.
type ToolBudget struct {
	// Tokens is the most tokens the tool's results may add to a session.
	Tokens int64
	// USD is the most model spend, in US dollars, that the turns calling
	// the tool may cost.
	USD float64
}

// overBudget returns the error result text of a call of tool in the
// session of root when the tool has spent its budget there, "" when it
// may run. The tool's own budget wins over its toolset's.
func (r *Runtime) overBudget(root string, sess *session, tool *rap.ResolvedTool) string {
	b := r.budgetFor(sess, tool)
	if b == nil {
		return ""
	}
	name := tool.Tool.Name
	spend, err := r.spentBy(r.baseCtx, root, name)
	if err != nil {
		r.log.Warn("budget not checked: reading the session's spend failed", "session", root, "tool", name, "err", err)
		return ""
	}
	if b.Tokens != nil && spend.tokens >= *b.Tokens {
		return fmt.Sprintf("Error: %s has used its budget for this session: its results took about %d tokens, and its budget is %d. It is not called again in this session; tell the user, who can raise the budget of the tool.",
			name, spend.tokens, *b.Tokens)
	}
	if b.USD != nil && spend.usd >= *b.USD {
		return fmt.Sprintf("Error: %s has used its budget for this session: the turns that called it cost about $%.4f of model use, and its budget is $%.4f. It is not called again in this session; tell the user, who can raise the budget of the tool.",
			name, spend.usd, *b.USD)
	}
	if b.USD != nil && !spend.priced {
		r.log.Warn(`a tool's budget in dollars is not fully enforced: the model's price is not known; add it to "prices" in rap.json`, "tool", name, "model", r.model.Name())
	}
	return ""
}

// budgetFor returns the tool's budget in sess: its own, else its
// toolset's (Config.ToolsetBudgets); nil when it has none.
func (r *Runtime) budgetFor(sess *session, tool *rap.ResolvedTool) *toolBudget {
	if b := budgetOf(tool); b != nil {
		return b
	}
	tb, ok := r.cfg.ToolsetBudgets[sess.bases[tool.Toolset]]
	if !ok || (tb.Tokens <= 0 && tb.USD <= 0) {
		return nil
	}
	b := &toolBudget{}
	if tb.Tokens > 0 {
		b.Tokens = &tb.Tokens
	}
	if tb.USD > 0 {
		b.USD = &tb.USD
	}
	return b
}

// sessionBudgets returns the budgets of the session's tools that have
// one, with what each spent; nil when none has, or when they cannot be
// read now.
func (r *Runtime) sessionBudgets(ctx context.Context, root string) []api.Budget {
	sess, err := r.sessionOf(ctx, root)
	if err != nil || sess.catalog == nil {
		return nil
	}
	var out []api.Budget
	for _, tool := range sess.catalog.Tools() {
		b := r.budgetFor(sess, tool)
		if b == nil {
			continue
		}
		spend, err := r.spentBy(ctx, root, tool.Tool.Name)
		if err != nil {
			return nil
		}
		ab := api.Budget{Tool: tool.Tool.Name, TokensSpent: spend.tokens, USDSpent: spend.usd}
		if b.Tokens != nil {
			ab.TokensLimit = *b.Tokens
		}
		if b.USD != nil {
			ab.USDLimit = *b.USD
			ab.Unpriced = !spend.priced
		}
		out = append(out, ab)
	}
	return out
}
