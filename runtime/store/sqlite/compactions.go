package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/backend"
)

// AddCompaction implements store.Compactions.
func (t *tx) AddCompaction(c store.Compaction) error {
	usage, err := backend.EncodeUsage(c.Usage)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(`INSERT INTO compactions (thread_id, upto_seq, summary, messages, usage, block, created) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.ThreadID, c.UpToSeq, c.Summary, c.Messages, textOrNull(usage), blobOrNull(c.Block), nanos(t.stamp(c.Created)))
	if err != nil {
		return fmt.Errorf("record the compaction of thread %s up to %d: %w", c.ThreadID, c.UpToSeq, err)
	}
	return nil
}

const compactionCols = `thread_id, upto_seq, summary, messages, usage, block, created`

// blobOrNull is b as a nullable BLOB parameter: NULL when empty.
func blobOrNull(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func scanCompaction(sc scanner) (store.Compaction, error) {
	var c store.Compaction
	var usage []byte
	var created int64
	if err := sc.Scan(&c.ThreadID, &c.UpToSeq, &c.Summary, &c.Messages, &usage, &c.Block, &created); err != nil {
		return c, err
	}
	c.Created = fromNanos(created)
	var err error
	c.Usage, err = backend.DecodeUsage(usage)
	return c, err
}

// LatestCompaction implements store.Compactions.
func (t *tx) LatestCompaction(threadID string) (store.Compaction, error) {
	c, err := scanCompaction(t.tx.QueryRow(`SELECT `+compactionCols+` FROM compactions WHERE thread_id = ? ORDER BY upto_seq DESC LIMIT 1`, threadID))
	if errors.Is(err, sql.ErrNoRows) {
		return c, backend.NotFound("compaction of thread", threadID)
	}
	if err != nil {
		return c, fmt.Errorf("read the compaction of thread %s: %w", threadID, err)
	}
	return c, nil
}

// ThreadCompactions implements store.Compactions.
func (t *tx) ThreadCompactions(threadID string) ([]store.Compaction, error) {
	return collect(t, "list the compactions of thread "+threadID, scanCompaction,
		`SELECT `+compactionCols+` FROM compactions WHERE thread_id = ? ORDER BY upto_seq`, threadID)
}
