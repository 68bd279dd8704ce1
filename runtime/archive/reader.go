package archive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLine is the longest line a Reader accepts: one record (a message
// with a large tool result, say) as JSON.
const MaxLine = 64 << 20

// Reader reads an archive, one session at a time.
type Reader struct {
	br     *bufio.Reader
	line   int
	done   bool
	count  int
	Header Header
}

// NewReader reads the header from r and returns a Reader positioned at
// the first session. A file that is not a session archive, or one of a
// later version than this package reads, is refused with an error that
// says so.
func NewReader(r io.Reader) (*Reader, error) {
	ar := &Reader{br: bufio.NewReaderSize(r, 64<<10)}
	b, err := ar.next()
	if errors.Is(err, io.EOF) {
		return nil, invalidf("read the archive: the input is empty; give a file rap export wrote")
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &ar.Header); err != nil || ar.Header.Format != Format {
		return nil, invalidf("read the archive: the input is not a gorap session archive (its first line does not say \"format\": %q); give a file rap export wrote", Format)
	}
	if ar.Header.Version < 1 || ar.Header.Version > Version {
		return nil, invalidf("read the archive: it is version %d of the format, and this gorap reads versions 1 to %d; import it with a newer gorap", ar.Header.Version, Version)
	}
	return ar, nil
}

// next returns the next line without its newline; io.EOF at the end of
// the input.
func (r *Reader) next() ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLine+1 {
			return nil, invalidf("read the archive: line %d is longer than %d bytes", r.line+1, MaxLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = nil // a last line without its newline
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				err = fmt.Errorf("read the archive after line %d: %w", r.line, err)
			}
			return nil, err
		}
		r.line++
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			continue // blank lines are allowed
		}
		return line, nil
	}
}

// Next returns the next session, checked (Validate). After the last one
// it returns io.EOF, once the end line confirmed that no session is
// missing. An archive cut short, a record it does not know, a record of
// a thread not in its session or counts that do not match are errors that
// name the line.
func (r *Reader) Next() (*Session, error) {
	if r.done {
		return nil, io.EOF
	}
	b, err := r.next()
	if errors.Is(err, io.EOF) {
		return nil, invalidf("read the archive: it ends after %d sessions without its end line; the file was cut short", r.count)
	}
	if err != nil {
		return nil, err
	}
	typ, err := lineType(b)
	if err != nil {
		return nil, r.fail(err)
	}
	switch typ {
	case typeEnd:
		var end endLine
		if err := json.Unmarshal(b, &end); err != nil {
			return nil, r.fail(err)
		}
		if end.Sessions != r.count {
			return nil, r.fail(fmt.Errorf("the end line counts %d sessions, but %d came before it", end.Sessions, r.count))
		}
		r.done = true
		return nil, io.EOF
	case typeSession:
	default:
		return nil, r.fail(fmt.Errorf("a %q line where a session should start", typ))
	}
	var start sessionLine
	if err := json.Unmarshal(b, &start); err != nil || start.Root == "" {
		return nil, r.fail(errors.New("a session line without its root"))
	}
	s := &Session{Root: start.Root}
	for {
		b, err := r.next()
		if errors.Is(err, io.EOF) {
			return nil, invalidf("read the archive: it ends inside session %s; the file was cut short", s.Root)
		}
		if err != nil {
			return nil, err
		}
		typ, err := lineType(b)
		if err != nil {
			return nil, r.fail(err)
		}
		if typ == typeSessionEnd {
			var end sessionEndLine
			if err := json.Unmarshal(b, &end); err != nil {
				return nil, r.fail(err)
			}
			if end.Root != s.Root || end.Records != s.Records() {
				return nil, r.fail(fmt.Errorf("session %s ends with a count of %d records for session %s, but %d came", s.Root, end.Records, end.Root, s.Records()))
			}
			if err := s.Validate(); err != nil {
				return nil, fmt.Errorf("read the archive: %w", err)
			}
			r.count++
			return s, nil
		}
		if err := s.add(typ, b); err != nil {
			return nil, r.fail(err)
		}
	}
}

func (r *Reader) fail(err error) error {
	return &invalid{msg: fmt.Sprintf("read the archive: line %d: %v", r.line, err)}
}

func lineType(b []byte) (string, error) {
	var t struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return "", fmt.Errorf("not a JSON object: %w", err)
	}
	if t.Type == "" {
		return "", errors.New(`a line without its "type"`)
	}
	return t.Type, nil
}

// add decodes one record line of type typ into s.
func (s *Session) add(typ string, b []byte) error {
	switch typ {
	case typeThread:
		return decodeInto(b, &s.Threads)
	case typeMessage:
		return decodeInto(b, &s.Messages)
	case typeInbox:
		return decodeInto(b, &s.Inbox)
	case typeCall:
		return decodeInto(b, &s.Calls)
	case typeSubscription:
		return decodeInto(b, &s.Subscriptions)
	case typeView:
		return decodeInto(b, &s.Views)
	case typeTimer:
		return decodeInto(b, &s.Timers)
	case typeToolset:
		return decodeInto(b, &s.Toolsets)
	case typeTrust:
		return decodeInto(b, &s.Trust)
	case typeChoice:
		return decodeInto(b, &s.Choices)
	case typeHeldEvent:
		return decodeInto(b, &s.HeldEvents)
	case typeCallCheck:
		return decodeInto(b, &s.CallChecks)
	case typeSeenKey:
		return decodeInto(b, &s.SeenKeys)
	case typeCompaction:
		return decodeInto(b, &s.Compactions)
	case typeSession, typeEnd:
		return fmt.Errorf("a %q line inside session %s, before its session_end", typ, s.Root)
	}
	return fmt.Errorf("a record of type %q, which this gorap does not know (it reads version %d of the format); import the file with the gorap that wrote it, or a newer one", typ, Version)
}

func decodeInto[T any](b []byte, dst *[]T) error {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*dst = append(*dst, v)
	return nil
}
