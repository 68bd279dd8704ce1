package runtime

// This file owns the budget of each session (Config.SessionBudget, rap.json
// "session_budget") and the prices spend in dollars is counted at
// (Config.Prices, rap.json "prices", over model's list prices).
//
// A session spends what the completions of its threads (the root and
// every child, at any depth) used, as saved with each turn
// (store.Message.Usage, the figures of session_usage): their input tokens
// (cached and cache-write input included) plus their output tokens, and
// their cost at the price of the model that answered each. Before each
// completion a slice checks its session (slice.go): once a limit is
// reached, the model is not asked again in that session. The inputs that
// would have needed the completion stay queued, the thread gets an error
// event naming the budget and the spend, and nothing retries on its own:
// a new input gets the same answer, and a restart with a larger budget
// answers what waits. Usage is durable, so a restart with the same budget
// keeps the session stopped.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// SessionBudget is the most model use one session may have: the tokens
// (input and output) and the US dollars of the completions of its
// threads. A zero field is no limit.
type SessionBudget struct {
	Tokens int64
	USD    float64
}

// limited reports whether b limits anything.
func (b SessionBudget) limited() bool { return b.Tokens > 0 || b.USD > 0 }

// checkSpend returns the price table of cfg, and the problems of its
// session budget and prices.
func checkSpend(cfg *Config) (*model.PriceTable, []string) {
	var problems []string
	if b := cfg.SessionBudget; b.Tokens < 0 || b.USD < 0 || math.IsNaN(b.USD) || math.IsInf(b.USD, 0) {
		problems = append(problems, fmt.Sprintf("SessionBudget is %d tokens and $%v: must not be negative (0 is no limit)", b.Tokens, b.USD))
	}
	prices, err := model.NewPriceTable(cfg.Prices)
	if err != nil {
		problems = append(problems, "Prices: "+err.Error())
	}
	return prices, problems
}

// logPrice warns at start when a budget in dollars is configured and the
// model has no known price: its completions cannot be counted.
func (r *Runtime) logPrice() {
	usd := r.cfg.SessionBudget.USD > 0
	for _, b := range r.cfg.ToolsetBudgets {
		usd = usd || b.USD > 0
	}
	if !usd {
		return
	}
	name := r.model.Name()
	if _, ok := r.prices.Of(name); ok {
		return
	}
	key := name
	if _, m, ok := strings.Cut(name, ":"); ok {
		key = m
	}
	key, _, _ = strings.Cut(key, " ")
	r.log.Warn(fmt.Sprintf("the price of model %s is not known, so budgets in US dollars do not count its completions (the client API marks such spend unpriced); "+
		`add its price in US dollars per million tokens to "prices" in rap.json, such as "prices": {%q: {"input": 3, "output": 15}} (Config.Prices in Go)`, name, key),
		"model", name)
}

// sessionSpend is what the completions of a session used.
type sessionSpend struct {
	// tokens are their input tokens (cached and cache-write included)
	// plus their output tokens.
	tokens int64
	// usd is their cost at the runtime's prices, of the completions of
	// models with a price.
	usd float64
	// unpriced are the models without a price that answered some of
	// them, sorted.
	unpriced []string
}

// sessionSpend sums what the completions of the session of root used,
// from the usage saved with each turn of its threads.
func (r *Runtime) sessionSpend(ctx context.Context, root string) (sessionSpend, error) {
	byModel := map[string]store.Usage{}
	err := r.store.View(ctx, func(tx store.Tx) error {
		threads, err := tx.SessionThreads(root)
		if err != nil {
			return err
		}
		for _, th := range threads {
			tt, err := r.tally.read(tx, th)
			if err != nil {
				return err
			}
			for m, u := range tt.byModel {
				sum := byModel[m]
				sum.Add(u)
				byModel[m] = sum
			}
		}
		return nil
	})
	if err != nil {
		return sessionSpend{}, fmt.Errorf("read the spend of session %s: %w", root, err)
	}
	var s sessionSpend
	for _, m := range slices.Sorted(maps.Keys(byModel)) {
		u := byModel[m]
		s.tokens += u.InputTokens + u.OutputTokens
		price, ok := r.prices.Of(m)
		if !ok {
			s.unpriced = append(s.unpriced, m)
			continue
		}
		s.usd += price.Cost(model.Usage{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens,
			CacheWriteInputTokens: u.CacheWriteInputTokens, OutputTokens: u.OutputTokens})
	}
	return s, nil
}

// usageTally keeps, for each thread whose spend was read, the sums of its
// own turns' usage by model up to a Seq: histories are append-only, so
// a later read adds only the messages saved since (store.HistorySince).
type usageTally struct {
	mu      sync.Mutex
	threads map[string]threadTally
}

// threadTally is one thread's usage by model up to the message seq.
type threadTally struct {
	seq     int64
	byModel map[string]store.Usage
}

// maxTallyThreads bounds the threads usageTally keeps; past it, it starts
// over (each thread is read whole again once).
const maxTallyThreads = 1 << 14

// read returns th's usage by model, reading in tx the messages saved
// since the last read.
func (t *usageTally) read(tx store.Tx, th store.Thread) (threadTally, error) {
	t.mu.Lock()
	tt := t.threads[th.ID]
	t.mu.Unlock()
	msgs, err := tx.HistorySince(th.ID, max(tt.seq, th.InheritSeq))
	if err != nil || len(msgs) == 0 {
		return tt, err
	}
	next := threadTally{seq: msgs[len(msgs)-1].Seq, byModel: maps.Clone(tt.byModel)}
	for _, m := range msgs {
		if m.Usage == nil {
			continue
		}
		if next.byModel == nil {
			next.byModel = map[string]store.Usage{}
		}
		sum := next.byModel[m.Usage.Model]
		sum.Add(*m.Usage)
		sum.Model = m.Usage.Model
		next.byModel[m.Usage.Model] = sum
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.threads == nil || len(t.threads) >= maxTallyThreads {
		t.threads = map[string]threadTally{}
	}
	if t.threads[th.ID].seq < next.seq {
		t.threads[th.ID] = next
	}
	return next, nil
}

// overBudgetError is the error of a slice whose session has used its
// budget: the model is not asked, and the inputs stay queued.
type overBudgetError struct {
	budget SessionBudget
	spend  sessionSpend
	tokens bool // the tokens are spent (else the dollars)
}

func (e *overBudgetError) Error() string {
	var b strings.Builder
	if e.tokens {
		fmt.Fprintf(&b, "this session has used its budget: its completions took %s tokens (input and output, over all its threads), and its budget is %s tokens",
			groupThousands(int(e.spend.tokens)), groupThousands(int(e.budget.Tokens)))
	} else {
		fmt.Fprintf(&b, "this session has used its budget: its completions cost about $%.4f of model use (over all its threads), and its budget is $%.2f",
			e.spend.usd, e.budget.USD)
		if len(e.spend.unpriced) > 0 {
			fmt.Fprintf(&b, " (not counting the completions of %s, whose price is not known)", strings.Join(e.spend.unpriced, ", "))
		}
	}
	b.WriteString(`. The model is not asked again in this session; the input is kept. To go on, raise "session_budget" in rap.json and restart rap serve, which then answers it`)
	return b.String()
}

// sessionOverBudget returns the error of a completion in the session of
// root when the session has used its budget, nil when the model may be
// asked (or when its spend cannot be read now: the completion's own
// commit would meet the same store).
func (r *Runtime) sessionOverBudget(ctx context.Context, root string) error {
	b := r.cfg.SessionBudget
	if !b.limited() {
		return nil
	}
	spend, err := r.sessionSpend(ctx, root)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("session budget not checked: reading the session's spend failed", "session", root, "err", err)
		}
		return nil
	}
	switch {
	case b.Tokens > 0 && spend.tokens >= b.Tokens:
		return &overBudgetError{budget: b, spend: spend, tokens: true}
	case b.USD > 0 && spend.usd >= b.USD:
		return &overBudgetError{budget: b, spend: spend}
	}
	return nil
}

// stopForBudget ends a slice whose session is over its budget (over)
// before a completion. Inputs it has not saved stay queued: the slice
// fails without progress, and nothing retries it until a new input or a
// restart. When it already saved them with an earlier turn (consumed),
// a wake-up row keeps the completion asked for, once for that point of
// the history (afterSeq), and the slice ends without error: the next
// slice finds the row and reports the budget.
func (r *Runtime) stopForBudget(ctx context.Context, threadID string, consumed bool, afterSeq int64, over error) (progressed, drained bool, err error) {
	if !consumed {
		return false, false, over
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err = r.store.Update(ctx, func(tx store.Tx) error {
		if err := r.coord.fence(ctx, tx, threadID); err != nil {
			return err
		}
		_, err := tx.Enqueue(store.InboxItem{ThreadID: threadID, Kind: store.KindWake,
			Payload:  []byte(`{"reason":"` + reasonSessionBudget + `"}`),
			DedupKey: fmt.Sprintf("session-budget:%s:%d", threadID, afterSeq)})
		return err
	})
	if err != nil {
		r.log.Error("queue the completion a session over its budget stopped; the thread's next input asks for it", "thread", threadID, "err", err)
		return true, false, over
	}
	return true, false, nil
}

// reasonSessionBudget marks the wake-up row of a turn a session's budget
// stopped.
const reasonSessionBudget = "session_budget"

// stoppedByBudget reports whether err, a thread's failed slice, was
// stopped by its session's budget: such a thread waits for a new input
// (or a restart), and the shared store's sweep leaves it alone.
func stoppedByBudget(err error) bool {
	var ob *overBudgetError
	return errors.As(err, &ob)
}

// sessionBudgetInfo returns the session budget of the session of root
// with what it spent, for its root's state; nil without a budget, or
// when the spend cannot be read now.
func (r *Runtime) sessionBudgetInfo(ctx context.Context, root string) *api.SessionBudget {
	b := r.cfg.SessionBudget
	if !b.limited() {
		return nil
	}
	spend, err := r.sessionSpend(ctx, root)
	if err != nil {
		return nil
	}
	return &api.SessionBudget{TokensLimit: b.Tokens, TokensSpent: spend.tokens, USDLimit: b.USD, USDSpent: spend.usd,
		Unpriced: b.USD > 0 && len(spend.unpriced) > 0,
		Over:     (b.Tokens > 0 && spend.tokens >= b.Tokens) || (b.USD > 0 && spend.usd >= b.USD)}
}
