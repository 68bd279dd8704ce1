package archive

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Writer writes an archive. Create one with NewWriter, add sessions with
// WriteSession and finish with Close, which writes the end line: an
// archive without it reads as cut short.
type Writer struct {
	w        *bufio.Writer
	sessions int
	err      error
	closed   bool
}

// NewWriter writes the header to w and returns a Writer. generator names
// the program writing, such as "gorap v0.9.0"; it may be empty.
func NewWriter(w io.Writer, generator string) (*Writer, error) {
	aw := &Writer{w: bufio.NewWriterSize(w, 64<<10)}
	aw.line("", Header{Format: Format, Version: Version, Created: time.Now().UTC(), Generator: generator})
	return aw, aw.err
}

// Create makes the file path readable and writable by its owner only,
// replacing one that exists, for an archive: archives hold conversations
// and the keys of the URLs tools gave the session.
func Create(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil { // an existing file keeps its mode otherwise
		f.Close()
		return nil, err
	}
	return f, nil
}

// line writes one line: v's JSON object with "type" first when typ is
// not empty.
func (w *Writer) line(typ string, v any) {
	if w.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		w.err = fmt.Errorf("write the archive: %w", err)
		return
	}
	if typ != "" {
		head := `{"type":` + quote(typ)
		if len(b) > 2 {
			head += ","
		}
		w.w.WriteString(head)
		b = b[1:]
	}
	w.w.Write(b)
	if err := w.w.WriteByte('\n'); err != nil {
		w.err = fmt.Errorf("write the archive: %w", err)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// WriteSession writes one session: its session line, its records and its
// session_end line. The session is checked first (Validate): one that
// would not read back is not written.
func (w *Writer) WriteSession(s *Session) error {
	if w.closed {
		return errors.New("write the archive: the writer is closed")
	}
	if err := s.Validate(); err != nil {
		return err
	}
	w.line(typeSession, sessionLine{Root: s.Root})
	each(w, typeThread, s.Threads)
	each(w, typeMessage, s.Messages)
	each(w, typeInbox, s.Inbox)
	each(w, typeCall, s.Calls)
	each(w, typeSubscription, s.Subscriptions)
	each(w, typeView, s.Views)
	each(w, typeTimer, s.Timers)
	each(w, typeToolset, s.Toolsets)
	each(w, typeTrust, s.Trust)
	each(w, typeChoice, s.Choices)
	each(w, typeHeldEvent, s.HeldEvents)
	each(w, typeCallCheck, s.CallChecks)
	each(w, typeSeenKey, s.SeenKeys)
	each(w, typeCompaction, s.Compactions)
	w.line(typeSessionEnd, sessionEndLine{Root: s.Root, Records: s.Records()})
	if w.err == nil {
		w.sessions++
	}
	return w.err
}

func each[T any](w *Writer, typ string, recs []T) {
	for i := range recs {
		w.line(typ, &recs[i])
	}
}

// Sessions reports how many sessions were written.
func (w *Writer) Sessions() int { return w.sessions }

// Close writes the end line and flushes. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	w.line(typeEnd, endLine{Sessions: w.sessions})
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("write the archive: %w", err)
		}
	}
	return w.err
}

// The line types.
const (
	typeSession      = "session"
	typeSessionEnd   = "session_end"
	typeEnd          = "end"
	typeThread       = "thread"
	typeMessage      = "message"
	typeInbox        = "inbox"
	typeCall         = "call"
	typeSubscription = "subscription"
	typeView         = "view"
	typeTimer        = "timer"
	typeToolset      = "toolset"
	typeTrust        = "trust"
	typeChoice       = "choice"
	typeHeldEvent    = "held_event"
	typeCallCheck    = "call_check"
	typeSeenKey      = "seen_key"
	typeCompaction   = "compaction"
)

type sessionLine struct {
	Root string `json:"root"`
}

type sessionEndLine struct {
	Root    string `json:"root"`
	Records int    `json:"records"`
}

type endLine struct {
	Sessions int `json:"sessions"`
}
