package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// Wake-ups across processes: every transaction that
// queues an inbox row also sends a NOTIFY on the schema's wake channel,
// naming the thread. PostgreSQL delivers it when the transaction commits
// (never for one rolled back), to every process listening, which wakes
// the thread if it holds it. The runtime's periodic sweep stays the safety
// net for a notification missed while a listener reconnects.

// wakeChannelPrefix starts the name of the channel; the schema follows,
// so that stores in different schemas of one database do not wake each
// other.
const wakeChannelPrefix = "rap_wake:"

// initWakes names the store's wake channel after its schema and gives the
// store the id that marks the notifications it sends.
func (s *Store) initWakes(ctx context.Context) error {
	var schema string
	if err := s.pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return fmt.Errorf("postgres store %s: read the current schema: %w", s.where, err)
	}
	s.wakeChannel = wakeChannelPrefix + schema
	if len(s.wakeChannel) > 63 { // PostgreSQL's longest identifier
		s.wakeChannel = s.wakeChannel[:63]
	}
	s.deltaChannel = deltaChannelPrefix + schema
	if len(s.deltaChannel) > 63 {
		s.deltaChannel = s.deltaChannel[:63]
	}
	b := make([]byte, 8)
	rand.Read(b)
	s.sender = hex.EncodeToString(b)
	return nil
}

// wakePayload is the notification that wakes threadID: the sender, a
// space, the thread id. Enqueue sends it with pg_notify in the statement
// that queues the row; PostgreSQL delivers it when the transaction commits
// and folds identical notifications of one transaction into one.
func (s *Store) wakePayload(threadID string) string { return s.sender + " " + threadID }

// ListenWakes listens on the store's wake channel (on the Store's one
// LISTEN connection, listen.go), calls ready once it listens, then wake with the id of each thread
// another process (another Store) queued an input for; notifications this
// Store sent are skipped, since the process that commits an input wakes
// the thread itself. It returns when ctx ends (nil) or the connection
// fails (the error; call it again to listen again).
func (s *Store) ListenWakes(ctx context.Context, ready func(), wake func(threadID string)) error {
	err := s.listen(ctx, s.wakeChannel, "wake-ups", ready, func(payload string) {
		sender, threadID, ok := strings.Cut(payload, " ")
		if ok && sender != s.sender && threadID != "" {
			wake(threadID)
		}
	})
	return nilWhenEnded(ctx, err)
}
