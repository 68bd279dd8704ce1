package postgres

// This file owns the LISTEN connections behind wake-ups, client events and
// text deltas: each holds a connection of its own, outside the pool.

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// listen holds a connection of its own (outside the pool, which it does
// not shrink) in LISTEN on channel, calls ready (when not nil) once it
// listens, then each with every notification's payload in the order
// sent, until ctx ends or the connection fails. It returns why it stopped,
// naming what it listened for.
func (s *Store) listen(ctx context.Context, channel, what string, ready func(), each func(payload string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("postgres store %s: connect to listen for %s: %w", s.where, what, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("postgres store %s: listen for %s: %w", s.where, what, err)
	}
	if ready != nil {
		ready()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("postgres store %s: wait for %s: %w", s.where, what, err)
		}
		each(n.Payload)
	}
}

// nilWhenEnded returns nil when ctx has ended (the listener was asked to
// stop), else err.
func nilWhenEnded(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
