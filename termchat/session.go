package termchat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// Options configure Run.
type Options struct {
	// Server is the runtime's URL, such as http://127.0.0.1:8080, and
	// Token the bearer token of its client API ("" for none).
	Server, Token string
	// API, when set, is used instead of an HTTP client of Server.
	API API
	// Thread resumes this thread (its history is printed first); "" starts
	// a new one.
	Thread string
	// Wait bounds how long the chat waits, after each message and at the
	// end of input, for the thread to be quiet. Default 2 minutes.
	Wait time.Duration
	// ShowStatus prints running/idle changes, and the tokens of each
	// completion (its "usage" event) under its turn.
	ShowStatus bool
	// Tree prints the thread tree (every session, or Thread's) and returns.
	Tree bool

	// Stdout and Stderr receive the transcript and the client's own
	// messages.
	Stdout, Stderr io.Writer
	// In is the input of a piped (non-interactive) session: one message,
	// or choice answer, per line.
	In io.Reader
	// Lines, when set, makes the session interactive: it reads each line
	// with a prompt (NewLineEditor for a terminal). Output that arrives
	// while the prompt is shown is printed above it.
	Lines LineReader
	// Interrupts delivers the user's Ctrl-C while a turn runs: the first
	// one stops waiting for the turn (it goes on in the runtime), a second
	// one ends the chat. Interactive sessions only; may be nil.
	Interrupts <-chan struct{}
	// Display says how results are drawn: colours, images.
	Display Display
}

// inputLine is one line of chat input.
type inputLine struct {
	text    string
	n       int  // line number, from 1
	tooLong bool // the line was longer than the limit and was dropped
}

// replayWait bounds the wait for the replay that starts an event stream.
const replayWait = 30 * time.Second

// errQuit ends a session at the user's request.
var errQuit = errors.New("quit")

// session is one running chat.
type session struct {
	opts     Options
	api      API
	threadID string
	tr       *transcript
	f        *follower
	root     *followedThread
	printMu  sync.Mutex // all output: the event readers and the input loop write it

	readerDone <-chan struct{}
	streamErr  func() error
	stop       func()

	refusals       int // messages or answers the runtime refused
	errsAtLastPost int
	form           *inputProgress // the answer being typed to a user input (inputs.go)
}

// Run runs "rap chat": it posts each input line as a user message and
// prints the thread's events, and those of the child threads it starts, in
// causal order. While a tool's user choice is open, a line answers it. A
// piped session ends when its input ended and the thread tree is quiet
// (RAP SU: no active subscription; no pending call unless a tool waits for
// the user), or when Wait expired. The error carries the exit status
// (ExitCode): 1 when the runtime refused a request or reported a failure.
func Run(ctx context.Context, opts Options) error {
	if opts.Wait <= 0 {
		opts.Wait = 2 * time.Minute
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	api := opts.API
	if api == nil {
		h, err := NewHTTPAPI(opts.Server, opts.Token)
		if err != nil {
			return usage("%v", err)
		}
		api = h
	}
	if opts.Tree {
		list, err := api.Threads(ctx, "")
		if err != nil {
			return refusal(err)
		}
		return printThreadTree(opts.Stdout, list, opts.Thread, "")
	}
	s := &session{opts: opts, api: api}
	if err := s.open(ctx); err != nil {
		return refusal(movedFailure(err, s.threadID))
	}
	defer s.close()
	err := s.loop(ctx)
	switch {
	case errors.Is(err, io.EOF):
		return movedFailure(s.finish(ctx), s.threadID)
	case errors.Is(err, errQuit):
		s.endLine()
		return nil
	}
	s.endLine()
	return movedFailure(err, s.threadID)
}

// refusal gives an error of the runtime API the failure status, with the
// server's refusal in plain words.
func refusal(err error) error {
	var ee *ExitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: ExitFailure, Err: err}
}

// open creates or resumes the thread, opens its event stream and shows
// what the thread did so far.
func (s *session) open(ctx context.Context) error {
	opts := s.opts
	s.tr = newTranscript(opts.Stdout, opts.Display)
	s.tr.echoUser = opts.Lines == nil
	s.tr.stream = opts.Lines != nil
	s.tr.showStatus = opts.ShowStatus
	s.tr.replaying = true
	s.threadID = opts.Thread
	if s.threadID == "" {
		c, err := s.api.CreateThread(ctx)
		if err != nil {
			return err
		}
		s.threadID = c.ID
		fmt.Fprintf(opts.Stdout, "thread %s (resume with: rap chat --thread %s)\n", s.threadID, s.threadID)
	}
	var earlier []api.Message
	var resumed []api.Thread
	if opts.Thread != "" {
		var compactions []api.Compaction
		var err error
		if earlier, compactions, err = historyOf(ctx, s.api, s.threadID); err != nil {
			return err
		}
		// The replay prints the history: with a line where each summary
		// the model reads instead of older messages ends.
		s.tr.expectCompactions(compactions)
		if resumed, err = s.api.Threads(ctx, s.threadID); err != nil {
			return err
		}
		fmt.Fprintf(opts.Stdout, "thread %s: %d earlier messages\n", s.threadID, len(earlier))
	}
	streamCtx, stopStream := context.WithCancel(ctx)
	s.f = newFollower(streamCtx, s.api, &s.printMu, opts.Stderr)
	s.f.after = func(*followedThread, Event) { s.tr.redrawPrompt() }
	s.root = s.f.root(s.threadID, s.tr)
	s.tr.line.promptFor = s.promptText
	events, streamErr, err := s.api.Events(streamCtx, s.threadID)
	if err != nil {
		stopStream()
		return err
	}
	s.streamErr = streamErr
	readerDone := make(chan struct{})
	s.readerDone = readerDone
	// The stream starts with a replay of the thread's state (RAP client
	// API: toolsets, the history, current views, open choices and
	// authorization links), ended by replay_done: once it is shown, what
	// the chat shows is complete and a line can answer an open choice.
	replayed := make(chan struct{})
	go func() {
		defer close(readerDone)
		var once sync.Once
		defer once.Do(func() { close(replayed) })
		for ev := range events {
			s.f.handle(s.root, ev)
			if ev.Type == api.EventReplayDone {
				once.Do(func() { close(replayed) })
			}
		}
	}()
	s.stop = func() {
		stopStream()
		<-readerDone
		s.f.wg.Wait()
	}
	select {
	case <-replayed:
	case <-time.After(replayWait):
		s.say(opts.Stderr, "rap chat: the runtime did not finish replaying thread %s within %v; going on\n", s.threadID, replayWait)
	case <-ctx.Done():
	}
	if opts.Thread != "" {
		s.printMu.Lock()
		if p := pendingCalls(earlier); len(p) > 0 {
			fmt.Fprintf(opts.Stdout, "  · %s still waiting for results\n", plural(len(p), "tool call"))
		}
		s.printMu.Unlock()
		// Follow the children still open; the closed ones are history.
		for _, th := range resumed {
			if th.Status == api.ThreadStatusClosed {
				s.f.markKnown(th.ID)
			} else {
				s.f.follow(th.ID, s.tr)
			}
		}
	}
	s.errsAtLastPost = s.root.watch.snapshot().errs
	return nil
}

func (s *session) close() { s.stop() }

// say prints a line of the client's own, after ending an unfinished line.
func (s *session) say(w io.Writer, format string, args ...any) {
	s.printMu.Lock()
	defer s.printMu.Unlock()
	s.tr.endLine()
	fmt.Fprintf(w, format, args...)
	s.tr.redrawPrompt()
}

func (s *session) endLine() {
	s.printMu.Lock()
	s.tr.endLine()
	s.printMu.Unlock()
}

// promptText shows what the next line is for: a message, or the answer to
// the oldest open choice.
func (s *session) promptText() string {
	if c, ok := s.f.asks.next(); ok {
		if c.fields != nil {
			return s.inputPromptText(c)
		}
		return fmt.Sprintf("choice 1-%d, d to dismiss> ", len(c.choices))
	}
	return "you> "
}

// loop reads the input until it ends, the user quits or the stream ends.
func (s *session) loop(ctx context.Context) error {
	in := s.input(ctx)
	for {
		line, err := in.next(ctx)
		if err != nil {
			return err
		}
		if line.tooLong {
			s.say(s.opts.Stderr, "rap chat: line %d not sent: it is longer than %d bytes\n", line.n, MaxChatLine)
			continue
		}
		if err := s.turn(ctx, line.text); err != nil {
			return err
		}
	}
}

// turn handles one line: a command, a choice answer or a message, and
// waits for what it caused. In an interactive session a Ctrl-C stops the
// wait (the turn goes on in the runtime) and a second one ends the chat.
func (s *session) turn(ctx context.Context, text string) error {
	// A Ctrl-C pressed while no turn ran is not for this one.
	for drained := false; !drained; {
		select {
		case <-s.opts.Interrupts:
		default:
			drained = true
		}
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.line(tctx, text) }()
	interrupted := false
	for {
		select {
		case err := <-done:
			if interrupted {
				s.say(s.opts.Stderr, "rap chat: interrupted; the turn goes on in the runtime and its output appears as it arrives (Ctrl-C again, or Ctrl-C at the prompt, exits)\n")
				return nil
			}
			return err
		case <-s.opts.Interrupts:
			if interrupted {
				<-done
				return errQuit
			}
			interrupted = true
			cancel()
		}
	}
}

// line handles one input line.
func (s *session) line(ctx context.Context, text string) error {
	text = strings.TrimSpace(text)
	stdout, stderr := s.opts.Stdout, s.opts.Stderr
	switch {
	case text == "/quit" || text == "/exit":
		return errQuit
	case text == "/threads":
		list, err := s.api.Threads(ctx, "")
		s.printMu.Lock()
		s.tr.endLine()
		if err == nil {
			err = printThreadTree(stdout, list, s.threadID, s.threadID)
		}
		if err != nil {
			fmt.Fprintf(stderr, "rap chat: /threads: %v\n", err)
		}
		s.printMu.Unlock()
		if _, moved := client.MovedTo(err); moved {
			return s.movedFailure(err)
		}
		return nil
	case text == "/usage":
		return s.showUsage(ctx) // usage.go
	case text == "/compact":
		return s.compactNow(ctx) // compact.go
	case text == "/move" || strings.HasPrefix(text, "/move "):
		return s.move(ctx, strings.Fields(text)[1:]) // move.go
	case text == "/dismiss":
		return s.dismissInput(ctx) // inputs.go
	case text == "/help":
		s.say(stdout, "commands: /threads (the thread tree of this session), /usage (the tokens this thread and its session used), /compact (the model summarises this thread's older messages now, and reads the summary instead of them from then on; every message is kept), %s, /dismiss (declines a tool's form), /quit; a line starting with // sends it with one / less\n", moveUsage)
		return nil
	case strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "//"):
		s.say(stderr, "rap chat: unknown command %q: the commands are /threads, /usage, /compact, /move, /dismiss, /help and /quit; to send a message that starts with /, start it with //\n", oneLine(text, 40))
		return nil
	}
	if c, open := s.f.asks.next(); open {
		if c.fields != nil {
			return s.answerInputLine(ctx, c, text)
		}
		return s.answerChoice(ctx, c, text)
	}
	if text == "" {
		return nil
	}
	if strings.HasPrefix(text, "//") {
		text = text[1:]
	}
	ws := s.root.watch.snapshot()
	s.errsAtLastPost = ws.errs
	_, asked := s.f.asks.count()
	countBefore, err := countUserText(ctx, s.api, s.threadID, text)
	if err != nil {
		return s.refused(err)
	}
	s.tr.noteOwnInput()
	if err := s.api.PostMessage(ctx, s.threadID, text); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return s.refused(fmt.Errorf("message not sent: %w", err))
	}
	goal := settleGoal{text: text, countBefore: countBefore, needIdle: true, idlesBefore: ws.idles, errsBefore: ws.errs,
		allCalls: s.opts.Lines == nil, asks: s.f.asks, asksBefore: asked}
	if err := waitSettled(ctx, s.api, s.root.watch, s.threadID, goal, s.opts.Wait); err != nil && ctx.Err() == nil {
		return s.waitFailed(err)
	}
	return nil
}

// refused handles a request the runtime refused: an authorization refusal
// ends the chat (nothing else will work); another refusal is reported, the
// chat goes on and ends with a failure status.
func (s *session) refused(err error) error {
	switch StatusOf(err) {
	case http.StatusPermanentRedirect:
		return s.movedFailure(err)
	case http.StatusUnauthorized, http.StatusForbidden:
		return failure("%w", err)
	case 0:
		if errors.Is(err, context.Canceled) {
			return nil
		}
	}
	s.refusals++
	s.say(s.opts.Stderr, "rap chat: %v\n", err)
	return nil
}

// waitFailed reports a wait that expired; a piped session fails, an
// interactive one goes on.
func (s *session) waitFailed(err error) error {
	if _, moved := client.MovedTo(err); moved {
		return s.movedFailure(err)
	}
	if s.opts.Lines == nil {
		return failure("%w", err)
	}
	s.say(s.opts.Stderr, "rap chat: %v\n", err)
	return nil
}

// finish waits, at the end of input, for the thread tree to be quiet and
// reports what is left.
func (s *session) finish(ctx context.Context) error {
	if err := s.f.waitQuiet(ctx, s.root, s.errsAtLastPost, s.opts.Wait); err != nil {
		s.endLine()
		return failure("%w", err)
	}
	s.printMu.Lock()
	defer s.printMu.Unlock()
	s.tr.endLine()
	stderr := s.opts.Stderr
	for _, d := range s.f.asks.describe() {
		fmt.Fprintf(stderr, "rap chat: %s; answer it with 'rap chat --thread %s'\n", d, s.threadID)
	}
	if s.root.watch.snapshot().errs > s.errsAtLastPost {
		return failure("the runtime reported an error; the unanswered message stays queued and is retried with the next message (resume with --thread %s)", s.threadID)
	}
	if s.refusals > 0 {
		return failure("the runtime refused %d of the messages, answers or moves (see above)", s.refusals)
	}
	return nil
}

// answerChoice sends the user's answer text to open choice c. A line that
// is not an answer, or an answer the runtime refuses, leaves the choice
// open. A piped session then waits for the thread of the choice to
// settle, so that a script's next line follows the tool's result.
func (s *session) answerChoice(ctx context.Context, c openChoice, text string) error {
	f := s.f
	selected, err := parseChoiceAnswer(text, len(c.choices))
	if err != nil {
		s.say(f.stderr, "rap chat: %v; the question stays open\n", err)
		return nil
	}
	t := f.followed(c.threadID)
	var before watchState
	if t != nil {
		before = t.watch.snapshot()
	}
	_, asked := f.asks.count()
	err = s.api.AnswerChoice(ctx, c.threadID, c.callID, selected)
	switch {
	case err == nil:
		f.asks.drop(c.threadID, c.callID)
	case StatusOf(err) == http.StatusNotFound:
		f.asks.drop(c.threadID, c.callID)
		s.say(f.stderr, "rap chat: %s's question is no longer open (answered elsewhere, or the tool finished): %v\n", toolLabel(c.tool), err)
		return nil
	default:
		if StatusOf(err) == http.StatusUnauthorized || StatusOf(err) == http.StatusForbidden {
			return failure("answer not delivered: %w", err)
		}
		if _, moved := client.MovedTo(err); moved {
			return s.movedFailure(err)
		}
		s.say(f.stderr, "rap chat: answer not delivered: %v; the question stays open, answer again\n", err)
		return nil
	}
	if s.opts.Lines != nil || t == nil {
		return nil
	}
	goal := settleGoal{needIdle: true, idlesBefore: before.idles, errsBefore: before.errs, allCalls: true, asks: f.asks, asksBefore: asked}
	if err := waitSettled(ctx, s.api, t.watch, c.threadID, goal, s.opts.Wait); err != nil && ctx.Err() == nil {
		return s.waitFailed(err)
	}
	return nil
}

// countUserText counts the user messages of the history whose text is text.
func countUserText(ctx context.Context, a API, threadID, text string) (int, error) {
	msgs, err := a.History(ctx, threadID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range msgs {
		if m.Role == api.RoleUser && m.Text == text {
			n++
		}
	}
	return n, nil
}
