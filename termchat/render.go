package termchat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gorap/gorap/runtime/api"
)

// Limits of what the chat client shows.
const (
	maxShownChoices = 100     // choices of one user_choice listed
	maxPromptChars  = 2000    // of a user_choice prompt
	maxAuthURL      = 8 << 10 // of an oauth link
	maxDiffLines    = 40      // of a diff display segment
	maxChildInput   = 160     // of a child thread's input (the runtime's note, a parent's message)
	maxFollowed     = 256     // child threads one chat follows
	maxTreeLines    = 2000    // lines of the thread tree
	maxTreeDepth    = 64      // levels of the thread tree
	maxViewSummary  = 200     // of a view's one-line summary
	quietPoll       = 250 * time.Millisecond
	// quietPollTimeout bounds one poll of the threads' states.
	quietPollTimeout = 15 * time.Second
	// childCatchUp bounds how long a parent's thread_closed event for a
	// child waits for the child's own stream to be printed.
	childCatchUp = 2 * time.Second
)

// lineState is shared by the transcripts that write to one output: the
// writer, if any, whose last line is unfinished (streamed text), and the
// input prompt, while one is shown.
type lineState struct {
	open io.Writer
	// out is the output itself (the root transcript's writer).
	out io.Writer
	// prompt is the prompt the user is typing after, "" when none; hidden
	// says it was cleared to print output above it and is not redrawn yet.
	prompt string
	hidden bool
	// promptFor computes the prompt to redraw (it changes while a choice
	// is open).
	promptFor func() string
}

// prefixWriter starts every line written through it with prefix: the
// output of a followed child thread.
type prefixWriter struct {
	w      io.Writer
	prefix string
	mid    bool // the last write did not end a line
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		if !p.mid {
			if _, err := io.WriteString(p.w, p.prefix); err != nil {
				return 0, err
			}
			p.mid = true
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if _, err := p.w.Write(b); err != nil {
				return 0, err
			}
			break
		}
		if _, err := p.w.Write(b[:i+1]); err != nil {
			return 0, err
		}
		b = b[i+1:]
		p.mid = false
	}
	return n, nil
}

// transcript renders a thread's events and history for people: streamed
// assistant text, tool calls with their display text, tool results (their
// display_as segment when there is one, else the text, shortened), errors,
// authorization links, user-choice pickers, views and child threads. It is
// shared by "rap chat" and "rap demo". Its methods are not safe for
// concurrent use: callers hold the lock of the output.
type transcript struct {
	w    io.Writer
	line *lineState
	// self is the thread shown; its messages are shown once each, by seq.
	self string
	// child marks a followed child thread: its inputs (the runtime's note,
	// a parent's message) are shown shortened as "»", and its toolsets and
	// its own closing are left to the parent's transcript.
	child bool
	// echoUser prints user messages as they are added to the history.
	echoUser bool
	// replaying is set until the stream's replay_done: the replayed
	// history's user messages are shown too.
	replaying bool
	// stream prints assistant text as it streams (text_delta events);
	// otherwise assistant text is printed when the turn is saved, so the
	// transcript follows the history's order exactly.
	stream bool
	// showStatus prints running/idle changes, and the tokens of each
	// completion under its turn.
	showStatus bool
	// maxResultLines and maxResultChars shorten tool results.
	maxResultLines, maxResultChars int

	// display says how results are drawn.
	display Display

	streamed bool                   // text deltas arrived since the last assistant message
	held     bool                   // text deltas of this turn are held back: printed with its message
	pending  map[string]bool        // calls shown whose results are not shown yet
	subs     bool                   // a subscription was confirmed: its events may start turns
	kids     map[string]bool        // child threads started and not closed
	images   []image                // images of the result being printed, to show under it
	calls    map[string]bool        // call ids already printed
	results  map[string]bool        // result call ids already printed
	seen     map[int64]bool         // seqs of self's messages already printed
	choices  map[string]shownChoice // user choices shown, by call id
	auth     map[string]string      // authorization links shown, by call id
	usages   []api.Usage            // completions' usage to show under their turn (showStatus)
	// compactions are those of the history being printed whose lines are
	// not printed yet, oldest first; compactionsShown the UpToSeq of every
	// compaction whose line was printed (compact.go).
	compactions      []api.Compaction
	compactionsShown map[int64]bool
}

// shownChoice is what a transcript remembers of a user choice to show its
// answer.
type shownChoice struct {
	tool    string
	choices []string
	def     int
}

func newTranscript(w io.Writer, d Display) *transcript {
	return &transcript{w: w, line: &lineState{out: w}, display: d, maxResultLines: 8, maxResultChars: 600,
		calls: map[string]bool{}, results: map[string]bool{}, seen: map[int64]bool{},
		choices: map[string]shownChoice{}, auth: map[string]string{},
		pending: map[string]bool{}, kids: map[string]bool{}, compactionsShown: map[int64]bool{}}
}

// forChild returns the transcript of child thread id: it writes to the
// same output, each line prefixed with the child's short id.
func (t *transcript) forChild(id string) *transcript {
	c := newTranscript(&prefixWriter{w: t.w, prefix: "  [" + shortID(id) + "] "}, t.display)
	c.line = t.line
	c.self, c.child, c.echoUser, c.showStatus = id, true, true, t.showStatus
	c.maxResultLines, c.maxResultChars = t.maxResultLines, t.maxResultChars
	return c
}

// endLine ends an unfinished line of the output. A prompt shown is
// cleared first: output goes above it, never after it, and
// redrawPrompt shows it again.
func (t *transcript) endLine() {
	if t.line.prompt != "" && !t.line.hidden {
		fmt.Fprint(t.line.out, "\r\x1b[K")
		t.line.hidden = true
		return
	}
	if t.line.open != nil {
		fmt.Fprintln(t.line.open)
		t.line.open = nil
	}
}

// promptShown records that the input prompt p is shown; the line reader
// prints it.
func (t *transcript) promptShown(p string) {
	t.line.prompt, t.line.hidden, t.line.open = p, false, nil
}

// promptDone records that the prompt's line was entered.
func (t *transcript) promptDone() {
	t.line.prompt, t.line.hidden, t.line.open = "", false, nil
}

// redrawPrompt shows the prompt again after output was printed above it.
// The line editor redraws the user's unfinished line at the next key.
func (t *transcript) redrawPrompt() {
	if t.line.prompt == "" || !t.line.hidden {
		return
	}
	if t.line.promptFor != nil {
		t.line.prompt = t.line.promptFor()
	}
	fmt.Fprint(t.line.out, t.line.prompt)
	t.line.hidden = false
}

// noteOwnInput records that the user sent a message: the turn it starts
// is caused by it alone when nothing else can feed the thread, and its
// text may stream.
func (t *transcript) noteOwnInput() {}

// live reports whether text deltas may be printed as they stream. The
// runtime announces the inputs a completion answers (tool results,
// subscription events, reports of child threads) before the completion
// streams, so a reply printed live follows its cause; deltas are held only
// while a prompt is shown, and the reply is then printed from its saved
// message.
func (t *transcript) live() bool {
	return t.stream && t.line.prompt == ""
}

// printf starts a new line of the transcript.
func (t *transcript) printf(format string, args ...any) {
	t.endLine()
	fmt.Fprintf(t.w, format, args...)
}

// userText shows a user-role message: what the user said, or a child
// thread's input.
func (t *transcript) userText(text string) {
	if text == "" {
		return
	}
	if t.child {
		t.printf("» %s\n", oneLine(shortIDs(clean(text)), maxChildInput))
		return
	}
	t.printf("you: %s\n", clean(text))
}

// event renders one event of the thread's stream.
func (t *transcript) event(ev Event) {
	switch ev.Type {
	case "text_delta":
		if t.held || !t.streamed && !t.live() {
			t.held = true
			return
		}
		var d struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.Text == "" {
			return
		}
		if t.line.open != t.w {
			t.endLine()
			fmt.Fprint(t.w, "assistant: ")
		}
		fmt.Fprint(t.w, clean(d.Text))
		t.line.open = t.w
		if strings.HasSuffix(d.Text, "\n") {
			t.line.open = nil
		}
		t.streamed = true
	case "message":
		var m api.Message
		if json.Unmarshal(ev.Data, &m) != nil {
			return
		}
		t.message(m, t.echoUser || t.replaying)
	case "tool_call":
		var c struct {
			CallID    string          `json:"call_id"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Display   string          `json:"display"`
		}
		if json.Unmarshal(ev.Data, &c) == nil {
			t.toolCall(c.CallID, c.Name, c.Arguments, c.Display)
		}
	case "tool_result":
		var r api.ToolResult
		if json.Unmarshal(ev.Data, &r) == nil {
			t.toolResult(r)
		}
	case "replay_done":
		t.replaying = false
	case "reset":
		// The stream could not resume and replays the thread afresh: what
		// was shown stays (messages and calls are not shown twice), but a
		// reply that was streaming would be streamed again from its start;
		// it is printed whole when it is saved instead.
		if t.streamed {
			t.streamed, t.held = false, true
			t.printf("  · (the connection was lost; the reply is shown again when it is complete)\n")
		}
	case "error":
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(ev.Data, &e)
		if e.Message == "" {
			e.Message = string(ev.Data)
		}
		t.printf("  ! error: %s\n", oneLine(clean(e.Message), 1000))
	case "toolsets":
		if t.child {
			return // the session's, shown by the root
		}
		var s struct {
			Loaded []string `json:"loaded"`
			Errors []any    `json:"errors"`
		}
		if json.Unmarshal(ev.Data, &s) != nil {
			return
		}
		t.printf("  · toolsets loaded: %s\n", orNone(clean(strings.Join(s.Loaded, ", "))))
		for _, e := range s.Errors {
			fmt.Fprintf(t.w, "  ! toolset error: %s\n", oneLine(clean(fmt.Sprint(e)), 300))
		}
	case "view":
		var v struct {
			ViewType string          `json:"view_type"`
			Content  json.RawMessage `json:"content"`
		}
		if json.Unmarshal(ev.Data, &v) == nil {
			t.printf("  · %s\n", viewLine(v.ViewType, v.Content))
		}
	case "oauth":
		t.oauth(ev.Data)
	case "user_choice":
		t.userChoice(ev.Data)
	case "choice_answered":
		t.choiceAnswered(ev.Data)
	case "user_input":
		t.userInput(ev.Data)
	case "input_answered":
		t.inputAnswered(ev.Data)
	case "thread_spawned":
		var e struct {
			ThreadID   string `json:"thread_id"`
			OriginTool string `json:"origin_tool"`
			Reason     string `json:"reason"`
		}
		if json.Unmarshal(ev.Data, &e) == nil {
			why := strings.ReplaceAll(e.Reason, "_", " ")
			if e.OriginTool != "" && e.OriginTool != toolSpawnThread {
				why += " of " + e.OriginTool
			}
			t.kids[e.ThreadID] = true
			t.printf("  · child thread %s started (%s)\n", shortID(e.ThreadID), clean(why))
		}
	case "thread_closed":
		var e struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(ev.Data, &e) == nil {
			delete(t.kids, e.ThreadID)
		}
		if e.ThreadID != "" && !(t.child && e.ThreadID == t.self) {
			t.printf("  · thread %s closed\n", shortID(e.ThreadID))
		}
	case "usage":
		t.noteUsage(ev.Data) // usage.go
	case "compacted":
		t.compactedEvent(ev.Data) // compact.go
	case "status":
		t.flushUsage()
		if t.showStatus {
			var s struct {
				State string `json:"state"`
			}
			if json.Unmarshal(ev.Data, &s) == nil {
				t.printf("  · %s\n", clean(s.State))
			}
		}
	}
}

// message renders one history message. A message of this transcript's own
// thread is shown once, whether it comes from the history or the stream.
func (t *transcript) message(m api.Message, echoUser bool) {
	if t.self != "" && m.ThreadID != "" && m.ThreadID != t.self {
		// A child's stream replays the history it inherited from its
		// parent (messages of the parent's thread): the parent's story,
		// shown there, not here; nor are its calls and results, announced
		// by the events that follow.
		for _, c := range m.ToolCalls {
			t.calls[c.ID] = true
		}
		for _, r := range m.ToolResults {
			t.results[r.CallID] = true
		}
		return
	}
	if t.self != "" && m.ThreadID == t.self && m.Seq > 0 {
		if t.seen[m.Seq] {
			return
		}
		t.seen[m.Seq] = true
	}
	if m.Seq > 0 {
		// A summary that ends before this message (compact.go).
		t.compactionsBefore(m.Seq, false)
	}
	switch m.Role {
	case api.RoleUser:
		if echoUser {
			t.userText(m.Text)
		}
	case api.RoleAssistant:
		if m.Text != "" {
			if !t.streamed {
				t.printf("assistant: %s\n", clean(strings.TrimRight(m.Text, "\n")))
			}
		}
		t.streamed, t.held = false, false
		t.endLine()
		for _, c := range m.ToolCalls {
			t.toolCall(c.ID, c.Name, c.Arguments, c.Display)
		}
		if !injectedOnly(m) {
			t.flushUsage() // the completion's tokens, under what it wrote
		}
	}
	for _, r := range m.ToolResults {
		t.toolResult(r)
	}
	if m.Seq > 0 {
		t.compactionsBefore(m.Seq, true)
	}
}

func (t *transcript) toolCall(id, name string, args json.RawMessage, display string) {
	if id != "" {
		if t.calls[id] {
			return
		}
		t.calls[id] = true
		if !t.results[id] {
			t.pending[id] = true
		}
	}
	if display == "" || isDefaultDisplay(display, name) {
		// The default rendering name(args) (RAP DS-2), made readable.
		display = name + "(" + argsText(args, 200) + ")"
	}
	t.printf("  → %s\n", shortIDs(oneLine(clean(display), 300)))
}

// isDefaultDisplay reports whether display is the default rendering of a
// call of tool name: name(JSON arguments).
func isDefaultDisplay(display, name string) bool {
	inner, ok := strings.CutPrefix(display, name+"(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return false
	}
	return json.Valid([]byte(inner[:len(inner)-1]))
}

func (t *transcript) toolResult(r api.ToolResult) {
	if r.CallID != "" {
		if t.results[r.CallID] {
			return
		}
		t.results[r.CallID] = true
		delete(t.pending, r.CallID)
	}
	if r.Subscription && !r.IsError {
		t.subs = true
	}
	t.images = nil
	text, kind := t.resultText(r)
	label := r.Name
	switch label {
	case "":
		label = "result"
	case toolInjected:
		label = "event"
	}
	if r.IsError {
		label += " (error)"
	}
	if r.Subscription {
		label += " (subscription)"
	}
	maxLines, maxChars := t.maxResultLines, t.maxResultChars
	if kind == "diff" {
		// The patch is the point of a diff: it gets more room.
		maxLines, maxChars = max(maxLines, maxDiffLines), max(maxChars, maxDiffLines*100)
	}
	text = shortIDs(clean(text))
	lines := strings.Split(shorten(text, maxLines, maxChars), "\n")
	if kind == "diff" {
		lines = t.display.colorDiff(lines)
	}
	t.printf("  ← %s: %s\n", label, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(t.w, "      %s\n", l)
	}
	for _, im := range t.images {
		for _, l := range t.display.imageLines(im) {
			fmt.Fprintf(t.w, "      %s\n", l)
		}
	}
	t.images = nil
}

func toolLabel(name string) string {
	if name == "" {
		return "a tool"
	}
	return oneLine(clean(name), 80)
}

// history renders stored messages, as when a thread is resumed or a child
// thread is first followed. Messages of other threads (a child's inherited
// history) are left out.
func (t *transcript) history(msgs []api.Message) {
	for _, m := range msgs {
		if t.self != "" && m.ThreadID != "" && m.ThreadID != t.self {
			continue
		}
		t.message(m, true)
	}
}
