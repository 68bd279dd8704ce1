package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gorap/gorap/runtime/store"
)

// Text deltas across processes: the text a model streams
// is relayed to the other processes with NOTIFY on the schema's delta
// channel, never stored. A notification is lost when no process listens
// at that moment; receivers detect the gap by the offsets.

// deltaChannelPrefix starts the name of the delta channel; the schema
// follows, as for the wake channel.
const deltaChannelPrefix = "rap_deltas:"

// MaxNotifyPayload is the longest NOTIFY payload, in bytes, PostgreSQL
// accepts in its default build (it must be shorter than 8000 bytes).
const MaxNotifyPayload = 7999

// deltaHeader is the start of a delta's payload: sender, after, offset,
// turn and thread id separated by spaces, then a newline; the text
// follows.
func deltaHeader(sender string, d store.TextDelta) string {
	return sender + " " + strconv.FormatInt(d.After, 10) + " " + strconv.Itoa(d.Offset) + " " + d.Turn + " " + d.ThreadID + "\n"
}

// DeltaPayloads returns the NOTIFY payloads of d from sender, each at most
// max bytes: a text too long for one is split, on UTF-8 boundaries, into
// pieces with consecutive offsets. A delta whose header alone does not
// fit yields nothing.
func DeltaPayloads(sender string, d store.TextDelta, max int) []string {
	var out []string
	text := d.Text
	for {
		// The header of the last piece is the longest (its offset has the
		// most digits): size every piece by it.
		room := max - len(deltaHeader(sender, store.TextDelta{After: d.After, Offset: d.Offset + len(text), Turn: d.Turn, ThreadID: d.ThreadID}))
		if room < utf8.UTFMax {
			return nil
		}
		n := len(text)
		if n > room {
			n = room
			for n > 0 && !utf8.RuneStart(text[n]) {
				n--
			}
		}
		out = append(out, deltaHeader(sender, d)+text[:n])
		d.Offset += n
		text = text[n:]
		if text == "" {
			return out
		}
	}
}

// parseDelta is the inverse of DeltaPayloads for one payload.
func parseDelta(payload string) (sender string, d store.TextDelta, ok bool) {
	header, text, ok := strings.Cut(payload, "\n")
	if !ok {
		return "", d, false
	}
	f := strings.SplitN(header, " ", 5)
	if len(f) != 5 {
		return "", d, false
	}
	after, err1 := strconv.ParseInt(f[1], 10, 64)
	off, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || off < 0 || f[3] == "" || f[4] == "" {
		return "", d, false
	}
	return f[0], store.TextDelta{ThreadID: f[4], After: after, Offset: off, Turn: f[3], Text: text}, true
}

// SendTextDeltas sends deltas, in order, to the other processes listening
// on the schema (ListenTextDeltas), splitting a text too long for one
// notification. The notifications of one call are sent together, in one
// statement.
func (s *Store) SendTextDeltas(ctx context.Context, deltas []store.TextDelta) error {
	var payloads []string
	for _, d := range deltas {
		if d.Text != "" {
			payloads = append(payloads, DeltaPayloads(s.sender, d, MaxNotifyPayload)...)
		}
	}
	if len(payloads) == 0 {
		return nil
	}
	// One statement, so one exchange with the database and one implicit
	// transaction: the notifications go out together, in the order of
	// the array (PostgreSQL evaluates a volatile function of the select
	// list after the ORDER BY).
	s.txc.roundTrips.Add(1)
	_, err := s.pool.Exec(ctx, `SELECT pg_notify($1, u.p) FROM unnest($2::text[]) WITH ORDINALITY AS u(p, i) ORDER BY u.i`, s.deltaChannel, payloads)
	if err != nil {
		return fmt.Errorf("postgres store %s: send text deltas: %w", s.where, err)
	}
	return nil
}

// ListenTextDeltas listens on the schema's delta channel (on the Store's
// one LISTEN connection, listen.go), calls ready once it listens, then deliver with each delta
// another Store sent, in the order sent. It returns when ctx ends (nil) or
// the connection fails (the error; call it again to listen again).
func (s *Store) ListenTextDeltas(ctx context.Context, ready func(), deliver func(store.TextDelta)) error {
	err := s.listen(ctx, s.deltaChannel, "text deltas", ready, func(payload string) {
		if sender, d, ok := parseDelta(payload); ok && sender != s.sender {
			deliver(d)
		}
	})
	return nilWhenEnded(ctx, err)
}
