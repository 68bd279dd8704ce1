package rap

import (
	"io"
	"net"
	"testing"
	"time"
)

// idleConn is a net.Conn whose reads find nothing sent.
type idleConn struct{ net.Conn }

func (idleConn) Read([]byte) (int, error) { return 0, io.EOF }
func (idleConn) Close() error             { return nil }

// fullListener returns a LimitListener of n with n waiting connections,
// oldest first.
func fullListener(t *testing.T, n int) (*limitListener, []*trackedConn) {
	t.Helper()
	l := LimitListener(nil, n, nil).(*limitListener)
	var conns []*trackedConn
	for range n {
		c := &trackedConn{Conn: idleConn{}, l: l}
		if _, ok := l.admit(c); !ok {
			t.Fatal("a connection under the limit was refused")
		}
		l.setPhase(c, phaseWaiting)
		conns = append(conns, c)
	}
	return l, conns
}

// byteConn is a net.Conn whose reads find one byte: part of a request.
type byteConn struct{ net.Conn }

func (byteConn) Read(p []byte) (int, error) { p[0] = 'G'; return 1, nil }
func (byteConn) Close() error               { return nil }

// A full listener closes, least progress first: the connection that sent
// part of its first headers and stalled; then a kept-alive one idle
// between requests; then one the server read from and found nothing in
// yet (its request may be on its way). A connection not read from at all
// (it may hold a whole request) is never closed.
func TestShedPrefersLeastProgress(t *testing.T) {
	l, conns := fullListener(t, 4)
	conns[3].Conn = byteConn{}
	l.setPhase(conns[1], phaseBusy) // served a request, then idle
	l.setPhase(conns[1], phaseWaiting)
	_, _ = conns[2].Read(make([]byte, 1)) // the server read and found nothing
	_, _ = conns[3].Read(make([]byte, 1)) // the server read part of a request
	for _, want := range []int{3, 1, 2} {
		victim, ok := l.admit(&trackedConn{Conn: idleConn{}, l: l})
		if !ok || victim != conns[want] {
			t.Fatalf("shed %p, want connection %d (%p)", victim, want, conns[want])
		}
	}
	// Only a new connection not read from yet waits, and new ones have
	// not been reported on: a new client is refused.
	if victim, ok := l.admit(&trackedConn{Conn: idleConn{}, l: l}); ok || victim != nil {
		t.Fatalf("shed %p, a connection the server had not read from", victim)
	}
}

// With no connection waiting for headers, the body furthest behind the
// minimum rate goes first; a busy connection never does.
func TestShedSlowestBodyNeverBusy(t *testing.T) {
	l, conns := fullListener(t, 3)
	now := time.Now()
	conns[0].bodyDue.Store(now.Add(time.Hour).UnixNano())
	conns[1].bodyDue.Store(now.Add(time.Minute).UnixNano()) // furthest behind
	l.setPhase(conns[0], phaseBody)
	l.setPhase(conns[1], phaseBody)
	l.setPhase(conns[2], phaseBusy)
	if victim, ok := l.admit(&trackedConn{Conn: idleConn{}, l: l}); !ok || victim != conns[1] {
		t.Fatalf("shed %p, want the body furthest behind (%p)", victim, conns[1])
	}
	l.setPhase(conns[0], phaseBusy)
	if victim, ok := l.admit(&trackedConn{Conn: idleConn{}, l: l}); ok || victim != nil {
		t.Fatalf("with every connection busy, admitted a new one by shedding %p", victim)
	}
}

// tlsConn is a net.Conn whose reads find the start of a TLS handshake.
type tlsConn struct{ net.Conn }

func (tlsConn) Read(p []byte) (int, error) { p[0] = tlsHandshake; return 1, nil }
func (tlsConn) Close() error               { return nil }

// Over TLS the listener sees ciphertext: a connection in its handshake is
// not taken for one that sent part of its headers.
func TestShedDoesNotTakeTLSForPartialHeaders(t *testing.T) {
	l, conns := fullListener(t, 2)
	conns[0].Conn = tlsConn{}
	conns[1].Conn = byteConn{}
	_, _ = conns[0].Read(make([]byte, 1))
	_, _ = conns[1].Read(make([]byte, 1))
	if victim, ok := l.admit(&trackedConn{Conn: idleConn{}, l: l}); !ok || victim != conns[1] {
		t.Fatalf("shed %p, want the plain connection with part of its headers (%p), not the TLS one", victim, conns[1])
	}
}
