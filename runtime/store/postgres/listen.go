package postgres

// This file owns the Store's LISTEN connection. Wake-ups, client events
// and text deltas share it: PostgreSQL wakes every listening connection
// of a database for each transaction that notifies, so one connection a
// process rather than one per channel divides that cost by three. The
// connection is opened by the first listener, listens on all three
// channels, and is closed when the last listener leaves or it fails.

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// listenMux is the Store's shared LISTEN connection and its listeners.
type listenMux struct {
	mu   sync.Mutex
	subs map[*listenSub]struct{}
	// conn is the connection new listeners join; nil when there is none.
	conn *muxConn
}

// listenSub is one listener: each is called with the payload of every
// notification on channel.
type listenSub struct {
	channel string
	each    func(payload string)
}

// muxConn is one life of the shared connection.
type muxConn struct {
	listening chan struct{} // closed once it listens on every channel
	done      chan struct{} // closed when it has ended, after err is set
	err       error
	cancel    context.CancelFunc
}

// listen calls ready (when not nil) once the Store's LISTEN connection
// listens, then each with the payload of every notification on channel,
// in the order sent, until ctx ends or the connection fails. It returns
// why it stopped, naming what it listened for.
func (s *Store) listen(ctx context.Context, channel, what string, ready func(), each func(payload string)) error {
	sub := &listenSub{channel: channel, each: each}
	mc := s.mux.join(s, sub)
	defer s.mux.leave(sub)
	select {
	case <-mc.listening:
		if ready != nil {
			ready()
		}
	case <-mc.done:
		return fmt.Errorf("postgres store %s: listen for %s: %w", s.where, what, mc.err)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-mc.done:
		return fmt.Errorf("postgres store %s: wait for %s: %w", s.where, what, mc.err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// join adds sub and returns the connection it listens through, opening
// one when there is none.
func (m *listenMux) join(s *Store, sub *listenSub) *muxConn {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subs == nil {
		m.subs = map[*listenSub]struct{}{}
	}
	m.subs[sub] = struct{}{}
	if m.conn == nil {
		ctx, cancel := context.WithCancel(context.Background())
		m.conn = &muxConn{listening: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
		go s.holdListening(ctx, m.conn)
	}
	return m.conn
}

// leave removes sub; the last listener to leave closes the connection.
func (m *listenMux) leave(sub *listenSub) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.subs, sub)
	if len(m.subs) == 0 && m.conn != nil {
		m.conn.cancel()
		m.conn = nil
	}
}

// deliver hands a notification to the listeners of its channel; fns is a
// buffer for them, returned for reuse.
func (m *listenMux) deliver(n *pgconn.Notification, fns []func(string)) []func(string) {
	fns = fns[:0]
	m.mu.Lock()
	for sub := range m.subs {
		if sub.channel == n.Channel {
			fns = append(fns, sub.each)
		}
	}
	m.mu.Unlock()
	for _, f := range fns {
		f(n.Payload)
	}
	return fns
}

// holdListening runs one life of the shared connection: it connects
// (outside the pool, which it does not shrink), listens on the Store's
// channels, and delivers notifications until ctx ends or the connection
// fails.
func (s *Store) holdListening(ctx context.Context, mc *muxConn) {
	err := s.listenOn(ctx, mc)
	s.mux.mu.Lock()
	if s.mux.conn == mc {
		s.mux.conn = nil
	}
	s.mux.mu.Unlock()
	mc.cancel()
	mc.err = err
	close(mc.done)
}

func (s *Store) listenOn(ctx context.Context, mc *muxConn) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range []string{s.wakeChannel, s.deltaChannel, EventsChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen on %s: %w", ch, err)
		}
	}
	close(mc.listening)
	var fns []func(string)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		fns = s.mux.deliver(n, fns)
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
