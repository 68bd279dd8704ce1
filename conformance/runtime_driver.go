package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/client"
)

// A driver makes the runtime under test converse: with gorap's /v1 API it
// does so itself; otherwise it tells a person what to send to the agent.
type driver interface {
	// start begins a new conversation for step with the message text and
	// returns its id (for a person: a name for it).
	start(ctx context.Context, step, text string) (string, error)
	// say sends text in the conversation.
	say(ctx context.Context, conv, text string) error
	// close closes the conversation.
	close(ctx context.Context, conv string) error
	// history returns the conversation's messages; errNoAPI when the
	// driver cannot read them.
	history(ctx context.Context, conv string) ([]api.Message, error)
	// thread returns the conversation's state; errNoAPI as for history.
	thread(ctx context.Context, conv string) (*api.ThreadInfo, error)
	// choices returns the user choices waiting in the conversation.
	choices(ctx context.Context, conv string) ([]api.Choice, error)
	// answerChoice answers a user choice.
	answerChoice(ctx context.Context, conv, callID, prompt string, selected int) error
	// settle waits until nothing more happens in the conversation without
	// a new message; a driver without the API returns at once.
	settle(ctx context.Context, conv string) error
	// move moves the conversation's session to another runtime.
	move(ctx context.Context, conv, to, token string) error
}

// errNoAPI says that the runtime's conversation cannot be read: it has no
// gorap /v1 API, so a check sees only what the runtime sends to the kit.
var errNoAPI = errors.New("the runtime's conversation cannot be read without gorap's /v1 API")

// apiDriver drives a runtime through gorap's client API.
type apiDriver struct {
	c *client.Client
}

func (d *apiDriver) start(ctx context.Context, _, text string) (string, error) {
	th, err := d.c.CreateThread(ctx, api.CreateThreadRequest{})
	if err != nil {
		return "", fmt.Errorf("creating a thread: %w", err)
	}
	return th.ID, d.say(ctx, th.ID, text)
}

func (d *apiDriver) say(ctx context.Context, conv, text string) error {
	if _, err := d.c.PostMessage(ctx, conv, text); err != nil {
		return fmt.Errorf("sending a message to thread %s: %w", conv, err)
	}
	return nil
}

func (d *apiDriver) close(ctx context.Context, conv string) error {
	return d.c.CloseThread(ctx, conv)
}

func (d *apiDriver) history(ctx context.Context, conv string) ([]api.Message, error) {
	return d.c.History(ctx, conv)
}

func (d *apiDriver) thread(ctx context.Context, conv string) (*api.ThreadInfo, error) {
	return d.c.Thread(ctx, conv)
}

func (d *apiDriver) choices(ctx context.Context, conv string) ([]api.Choice, error) {
	return d.c.Choices(ctx, conv)
}

func (d *apiDriver) answerChoice(ctx context.Context, conv, callID, _ string, selected int) error {
	_, err := d.c.AnswerChoice(ctx, conv, callID, selected)
	return err
}

func (d *apiDriver) settle(ctx context.Context, conv string) error {
	_, err := d.c.WaitQuiet(ctx, conv)
	if errors.Is(err, client.ErrTurnFailed) {
		return nil
	}
	return err
}

func (d *apiDriver) move(ctx context.Context, conv, to, token string) error {
	_, err := d.c.MoveSession(ctx, conv, api.MoveRequest{To: to, Token: token})
	return err
}

// manualDriver tells a person what to do in the runtime's user interface,
// one numbered instruction at a time; the checks then wait for what the
// runtime sends to the kit.
type manualDriver struct {
	mu sync.Mutex
	w  io.Writer
	n  int
}

func (d *manualDriver) tell(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	fmt.Fprintf(d.w, ">>> %d. %s\n", d.n, fmt.Sprintf(format, args...))
}

func (d *manualDriver) start(_ context.Context, step, text string) (string, error) {
	d.tell("In a NEW conversation, send the agent: %s", text)
	return fmt.Sprintf("of step %q", step), nil
}

func (d *manualDriver) say(_ context.Context, _, text string) error {
	d.tell("In the same conversation, send the agent: %s", text)
	return nil
}

func (d *manualDriver) close(_ context.Context, conv string) error {
	d.tell("Close (end) the conversation %s, so that the runtime sends /close_thread", conv)
	return nil
}

func (d *manualDriver) history(context.Context, string) ([]api.Message, error) {
	return nil, errNoAPI
}

func (d *manualDriver) thread(context.Context, string) (*api.ThreadInfo, error) { return nil, errNoAPI }

func (d *manualDriver) choices(context.Context, string) ([]api.Choice, error) { return nil, errNoAPI }

func (d *manualDriver) answerChoice(_ context.Context, _, _, prompt string, selected int) error {
	d.tell("The agent asks %q: choose option %d", prompt, selected+1)
	return nil
}

func (d *manualDriver) settle(context.Context, string) error { return nil }

func (d *manualDriver) move(_ context.Context, _, to, _ string) error {
	d.tell("Move the conversation's session to the runtime at %s", to)
	return nil
}

// resultTexts returns the texts of the tool results in msgs, with the
// text items of their content.
func resultTexts(msgs []api.Message) []string {
	var out []string
	for _, m := range msgs {
		for _, r := range m.ToolResults {
			s := r.Text
			for _, c := range r.Content {
				s += " " + c.Text
			}
			out = append(out, s)
		}
	}
	return out
}

// countIn counts the tool results of msgs whose text contains s.
func countIn(msgs []api.Message, s string) int {
	n := 0
	for _, t := range resultTexts(msgs) {
		if strings.Contains(t, s) {
			n++
		}
	}
	return n
}
