package durable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/gorap/gorap/rap"
)

var _ rap.ResultLookup = (*Store)(nil)

// PendingResult reports whether a tool result for the call (groupID, id)
// waits in the outbox. It implements rap.ResultLookup, with which a
// restarted tool server answers POST /tool_call_status "delivering" for a
// result the previous process stored. It reads every pending message's
// body, which is cheap for the usual small backlog.
func (s *Store) PendingResult(ctx context.Context, groupID, id string) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM outbox
		WHERE json_valid(CAST(body AS TEXT))
		  AND json_extract(CAST(body AS TEXT), '$.type') = 'tool_result'
		  AND json_extract(CAST(body AS TEXT), '$.group_id') = ?
		  AND json_extract(CAST(body AS TEXT), '$.id') = ?
		LIMIT 1`, groupID, id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("durable: looking up the result of call %s in %s: %w", id, s.path, err)
	}
	return true, nil
}
