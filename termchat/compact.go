package termchat

// This file owns what the chat says about compaction (docs/threads.md):
// when a thread's older messages were summarised, the model reads the
// summary instead of them, while the history keeps them all. A printed
// history shows a line where each summary ends, the "compacted" event
// prints the same line live, and the /compact command asks for a
// compaction now.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// maxSummaryLine bounds the part of a summary a compaction's line shows.
const maxSummaryLine = 160

// compactor is an API that compacts threads and reads their compactions;
// NewHTTPAPI's does.
type compactor interface {
	// CompactThread compacts the thread now.
	CompactThread(ctx context.Context, threadID string) (*api.Compaction, error)
	// HistoryWithCompactions returns the thread's messages and its
	// compactions, oldest first.
	HistoryWithCompactions(ctx context.Context, threadID string) (*api.HistoryResponse, error)
}

// CompactThread implements compactor.
func (a clientAPI) CompactThread(ctx context.Context, threadID string) (*api.Compaction, error) {
	return a.c.CompactThread(ctx, threadID)
}

// HistoryWithCompactions implements compactor.
func (a clientAPI) HistoryWithCompactions(ctx context.Context, threadID string) (*api.HistoryResponse, error) {
	return a.c.HistoryWithCompactions(ctx, threadID)
}

// historyOf returns a thread's messages and, when the API reads them, its
// compactions.
func historyOf(ctx context.Context, a API, threadID string) ([]api.Message, []api.Compaction, error) {
	if c, ok := a.(compactor); ok {
		h, err := c.HistoryWithCompactions(ctx, threadID)
		if err != nil {
			return nil, nil, err
		}
		return h.Messages, h.Compactions, nil
	}
	msgs, err := a.History(ctx, threadID)
	return msgs, nil, err
}

// compactionLine says what a compaction did, with the start of its
// summary: "· compacted 12 earlier messages (the model sees a summary):
// The user asked…".
func compactionLine(c api.Compaction) string {
	first, rest, _ := strings.Cut(strings.TrimSpace(clean(c.Summary)), "\n")
	line := oneLine(first, maxSummaryLine)
	if strings.TrimSpace(rest) != "" && !strings.HasSuffix(line, "…") {
		line += "…"
	}
	noun := "messages"
	if c.Messages == 1 {
		noun = "message"
	}
	return fmt.Sprintf("  · compacted %d earlier %s (the model sees a summary): %s\n", c.Messages, noun, line)
}

// expectCompactions records the compactions of the history about to be
// printed: each one's line is printed right after the last message its
// summary covers.
func (t *transcript) expectCompactions(cs []api.Compaction) {
	for _, c := range cs {
		if !t.compactionsShown[c.UpToSeq] {
			t.compactions = append(t.compactions, c)
		}
	}
	sort.SliceStable(t.compactions, func(i, j int) bool { return t.compactions[i].UpToSeq < t.compactions[j].UpToSeq })
}

// compactionsBefore prints the lines of the compactions expected whose
// summaries cover only messages before seq (inclusive: up to and
// including seq).
func (t *transcript) compactionsBefore(seq int64, inclusive bool) {
	for len(t.compactions) > 0 {
		c := t.compactions[0]
		if c.UpToSeq > seq || c.UpToSeq == seq && !inclusive {
			return
		}
		t.compactions = t.compactions[1:]
		t.compacted(c)
	}
}

// compacted prints a compaction's line, once per compaction.
func (t *transcript) compacted(c api.Compaction) {
	if t.compactionsShown[c.UpToSeq] {
		return
	}
	t.compactionsShown[c.UpToSeq] = true
	t.printf("%s", compactionLine(c))
}

// compactedEvent prints the line of a compaction that just happened (the
// "compacted" event).
func (t *transcript) compactedEvent(data json.RawMessage) {
	var c api.Compaction
	if json.Unmarshal(data, &c) != nil || c.UpToSeq <= 0 {
		return
	}
	t.compacted(c)
}

// compactNow runs /compact: the thread's model summarises its older
// messages now. The chat says so while the model writes, then prints the
// compaction's line, or why there was nothing to compact.
func (s *session) compactNow(ctx context.Context) error {
	c, ok := s.api.(compactor)
	if !ok {
		s.say(s.opts.Stderr, "rap chat: /compact: this client cannot compact threads\n")
		return nil
	}
	s.say(s.opts.Stdout, "  · compacting… the model is writing a summary\n")
	comp, err := c.CompactThread(ctx, s.threadID)
	switch {
	case err == nil:
		s.printMu.Lock()
		// The compacted event may have printed it already.
		s.tr.compacted(*comp)
		s.tr.redrawPrompt()
		s.printMu.Unlock()
		return nil
	case ctx.Err() != nil:
		return nil
	}
	if _, moved := client.MovedTo(err); moved {
		return s.movedFailure(err)
	}
	switch StatusOf(err) {
	case http.StatusUnauthorized, http.StatusForbidden:
		return failure("/compact: %w", err)
	case http.StatusBadRequest:
		// The runtime's reason, such as "nothing to compact yet: …".
		var ce *client.Error
		if errors.As(err, &ce) {
			s.say(s.opts.Stderr, "rap chat: /compact: not compacted: %s\n", strings.TrimPrefix(ce.Message, "bad input: "))
			return nil
		}
	}
	s.say(s.opts.Stderr, "rap chat: /compact: %v\n", err)
	return nil
}
