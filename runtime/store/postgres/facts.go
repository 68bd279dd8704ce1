package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

var _ store.StateFactsReader = (*tx)(nil)

// StateFacts implements store.StateFactsReader: the reads of Thread,
// Queued, ThreadTimers, ThreadChoices, PendingCalls, ThreadSubscriptions
// and LastSeq, sent in one batch (one round trip instead of seven).
func (t *tx) StateFacts(threadID string) (store.StateFacts, error) {
	var f store.StateFacts
	b := &pgx.Batch{}
	for _, q := range []string{threadSQL, queuedSQL, threadTimersSQL, threadChoicesSQL, pendingCallsSQL, threadSubscriptionsSQL, lastSeqSQL} {
		b.Queue(q, threadID)
	}
	br, err := t.sendBatch(b)
	if err != nil {
		return f, fmt.Errorf("read the state of thread %s: %w", threadID, err)
	}
	err = readStateFacts(br, threadID, &f)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return f, backend.NotFound("thread", threadID)
	}
	if err != nil {
		return f, fmt.Errorf("read the state of thread %s: %w", threadID, t.note(err))
	}
	return f, nil
}

// readStateFacts reads the results of StateFacts's batch into f, in the
// order they were queued.
func readStateFacts(br pgx.BatchResults, threadID string, f *store.StateFacts) error {
	var err error
	if f.Thread, err = scanThread(br.QueryRow()); err != nil {
		return err
	}
	if f.Queued, err = nextRows(br, scanInbox(threadID)); err != nil {
		return err
	}
	if f.Timers, err = nextRows(br, scanTimerRows); err != nil {
		return err
	}
	if f.Choices, err = nextRows(br, scanChoiceRows); err != nil {
		return err
	}
	if f.PendingCalls, err = nextRows(br, scanCallRows); err != nil {
		return err
	}
	if f.Subscriptions, err = nextRows(br, scanSubscriptionRows); err != nil {
		return err
	}
	f.LastSeq, err = scanLastSeq(br.QueryRow())
	return err
}

// nextRows reads every row of the batch's next result with scan.
func nextRows[T any](br pgx.BatchResults, scan func(pgx.Rows) (T, error)) ([]T, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return scanAll(rows, scan)
}
