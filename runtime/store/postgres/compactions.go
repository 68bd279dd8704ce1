package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// AddCompaction implements store.Compactions.
func (t *tx) AddCompaction(c store.Compaction) error {
	usage, err := backend.EncodeUsage(c.Usage)
	if err != nil {
		return err
	}
	_, err = t.exec(`INSERT INTO compactions (thread_id, upto_seq, summary, messages, usage, block, created) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		c.ThreadID, c.UpToSeq, bin(c.Summary), c.Messages, usage, binOrNull(c.Block), t.stamp(c.Created))
	if err != nil {
		return fmt.Errorf("record the compaction of thread %s up to %d: %w", c.ThreadID, c.UpToSeq, err)
	}
	return nil
}

const compactionCols = `thread_id, upto_seq, summary, messages, usage, block, created`

func scanCompaction(sc interface{ Scan(...any) error }) (store.Compaction, error) {
	var c store.Compaction
	var summary, usage []byte
	if err := sc.Scan(&c.ThreadID, &c.UpToSeq, &summary, &c.Messages, &usage, &c.Block, &c.Created); err != nil {
		return c, err
	}
	c.Summary, c.Created = string(summary), utc(c.Created)
	var err error
	c.Usage, err = backend.DecodeUsage(usage)
	return c, err
}

// LatestCompaction implements store.Compactions.
func (t *tx) LatestCompaction(threadID string) (store.Compaction, error) {
	c, err := scanCompaction(t.queryRow(`SELECT `+compactionCols+` FROM compactions WHERE thread_id = $1 ORDER BY upto_seq DESC LIMIT 1`, threadID))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, backend.NotFound("compaction of thread", threadID)
	}
	if err != nil {
		return c, fmt.Errorf("read the compaction of thread %s: %w", threadID, err)
	}
	return c, nil
}

// ThreadCompactions implements store.Compactions.
func (t *tx) ThreadCompactions(threadID string) ([]store.Compaction, error) {
	return collect(t, "list the compactions of thread "+threadID, func(rows pgx.Rows) (store.Compaction, error) { return scanCompaction(rows) },
		`SELECT `+compactionCols+` FROM compactions WHERE thread_id = $1 ORDER BY upto_seq`, threadID)
}
