package termchat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/peterh/liner"

	"github.com/gorap/gorap/runtime/client"
)

// MaxChatLine bounds one line of chat input. The runtime has its own,
// smaller limit on a message (runtime.MaxMessageBytes).
const MaxChatLine = 1 << 20

// LineReader reads the lines of an interactive session.
type LineReader interface {
	// Prompt shows prompt and returns the line the user typed, without
	// its newline. It returns ErrInterrupted when the user pressed Ctrl-C
	// at the prompt and io.EOF at the end of input (Ctrl-D).
	Prompt(prompt string) (string, error)
}

// ErrInterrupted is returned by a LineReader when the user pressed Ctrl-C
// at the prompt: the chat ends.
var ErrInterrupted = errors.New("interrupted")

// LineEditor is a LineReader for a terminal: line editing (arrow keys,
// Home/End, Ctrl-A/E/K/W…) and a history of earlier lines (up/down, Ctrl-R
// search), kept in a file between sessions. Close restores the terminal.
type LineEditor struct {
	st      *liner.State
	history string
}

// NewLineEditor puts the terminal in line-editing mode and loads the
// history from historyFile ("" for no history file).
func NewLineEditor(historyFile string) *LineEditor {
	st := liner.NewLiner()
	st.SetCtrlCAborts(true)
	e := &LineEditor{st: st, history: historyFile}
	if historyFile != "" {
		if f, err := os.Open(historyFile); err == nil {
			_, _ = st.ReadHistory(f)
			f.Close()
		}
	}
	return e
}

// DefaultHistoryFile is where the chat keeps its input history:
// $XDG_STATE_HOME/rap/chat_history, or ~/.local/state/rap/chat_history.
func DefaultHistoryFile() string {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "rap", "chat_history")
}

// Prompt implements LineReader.
func (e *LineEditor) Prompt(prompt string) (string, error) {
	l, err := e.st.Prompt(prompt)
	switch {
	case errors.Is(err, liner.ErrPromptAborted):
		return "", ErrInterrupted
	case err != nil:
		return "", err
	}
	if strings.TrimSpace(l) != "" {
		e.st.AppendHistory(historyEntry(l))
	}
	return l, nil
}

// Close saves the history (a 0600 file) and restores the terminal.
func (e *LineEditor) Close() error {
	if e.history != "" {
		if err := os.MkdirAll(filepath.Dir(e.history), 0o700); err == nil {
			if f, err := os.OpenFile(e.history, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err == nil {
				_, _ = e.st.WriteHistory(f)
				f.Close()
			}
		}
	}
	return e.st.Close()
}

// input yields the session's lines: from the LineReader with a prompt, or
// from the piped input.
type input struct {
	s     *session
	lines chan inputLine
	errs  chan error
	n     int
}

func (s *session) input(ctx context.Context) *input {
	in := &input{s: s}
	if s.opts.Lines != nil {
		return in
	}
	in.lines, in.errs = make(chan inputLine), make(chan error, 1)
	r := s.opts.In
	if r == nil {
		r = strings.NewReader("")
	}
	go func() {
		in.errs <- readLines(r, MaxChatLine, func(l inputLine) bool {
			select {
			case in.lines <- l:
				return true
			case <-ctx.Done():
				return false
			}
		})
		close(in.lines)
	}()
	return in
}

// next returns the next line; errQuit at the end of input or when the
// user ends the chat, or an error when the event stream ended.
func (in *input) next(ctx context.Context) (inputLine, error) {
	s := in.s
	if s.opts.Lines == nil {
		select {
		case l, ok := <-in.lines:
			if !ok {
				if err := <-in.errs; err != nil {
					return inputLine{}, failure("reading input: %w", err)
				}
				return inputLine{}, io.EOF
			}
			// An escape sequence (an arrow key typed into a terminal that
			// had no line editing) is never meant for the model.
			l.text = stripEscapes(l.text)
			return l, nil
		case <-ctx.Done():
			return inputLine{}, errQuit
		case <-s.readerDone:
			return inputLine{}, s.streamEnded()
		}
	}
	type res struct {
		text string
		err  error
	}
	got := make(chan res, 1)
	p := s.promptText()
	s.printMu.Lock()
	s.tr.endLine()
	s.tr.promptShown(p)
	s.printMu.Unlock()
	go func() {
		t, err := s.opts.Lines.Prompt(p)
		got <- res{t, err}
	}()
	var r res
	select {
	case r = <-got:
	case <-ctx.Done():
		return inputLine{}, errQuit
	case <-s.readerDone:
		return inputLine{}, s.streamEnded()
	}
	s.printMu.Lock()
	s.tr.promptDone() // the terminal echoed the line and its newline
	s.printMu.Unlock()
	in.n++
	switch {
	case errors.Is(r.err, ErrInterrupted):
		return inputLine{}, errQuit
	case r.err != nil:
		return inputLine{}, io.EOF
	case len(r.text) > MaxChatLine:
		return inputLine{n: in.n, tooLong: true}, nil
	}
	return inputLine{text: stripEscapes(r.text), n: in.n}, nil
}

func (s *session) streamEnded() error {
	err := s.streamErr()
	if _, moved := client.MovedTo(err); moved {
		return s.movedFailure(err)
	}
	return failure("event stream of thread %s ended: %v (the server may have stopped; resume with --thread %s)", s.threadID, err, s.threadID)
}

// readLines reads lines from r and passes them to emit until the input
// ends (nil), reading fails, or emit returns false. A line longer than max
// bytes is dropped and reported with tooLong, and reading goes on.
func readLines(r io.Reader, max int, emit func(inputLine) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	for {
		var buf []byte
		tooLong := false
		for {
			frag, isPrefix, err := br.ReadLine()
			if err == io.EOF {
				if len(buf) == 0 && !tooLong {
					return nil
				}
				break
			}
			if err != nil {
				return err
			}
			if !tooLong {
				if len(buf)+len(frag) > max {
					tooLong, buf = true, nil
				} else {
					buf = append(buf, frag...)
				}
			}
			if !isPrefix {
				break
			}
		}
		n++
		if !emit(inputLine{text: string(buf), n: n, tooLong: tooLong}) {
			return nil
		}
	}
}

// stripEscapes removes terminal escape sequences from a line: CSI
// sequences such as the arrow keys' ESC [ D, SS3 sequences such as ESC O
// H, and other two-byte escapes.
func stripEscapes(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			break
		}
		switch s[i+1] {
		case '[':
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
		case 'O':
			i += 2
		default:
			i++
		}
	}
	return b.String()
}

var _ = fmt.Sprint
