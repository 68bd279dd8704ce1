package webui_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/gorap/gorap/display"
	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime"
)

// The tool server of the browser tests: a file edit with a diff, an image
// and a progress view; a deployment that asks the user where; a calendar
// that needs OAuth; a countdown subscription whose events run in child
// threads.
func demoTools(t *testing.T, authorized <-chan struct{}) string {
	s := rap.NewServer("workbench", &rap.ServerOptions{Description: "Tools for the web UI tests."})
	type pathArgs struct {
		Path string `json:"path"`
	}
	rap.AddTool(s, &rap.Tool{Name: "edit_file", Description: "Edits a file.", DisplayScript: `"Edit " + args.path`},
		func(ctx context.Context, c *rap.Call, in pathArgs) (*rap.Reply, error) {
			if err := c.UpdateView(ctx, "build", map[string]any{"label": "Compiling " + in.Path, "progress": 0.6}); err != nil {
				return nil, err
			}
			patch := "--- a/main.go\n+++ b/main.go\n@@ -1,3 +1,3 @@\n package main\n-// TODO: greet\n+// Greets the world.\n func main() { println(\"hello\") }\n"
			return &rap.Reply{
				Text:      "edited " + in.Path + ": 1 line changed",
				DisplayAs: []rap.DisplaySegment{rap.DiffSegment(in.Path, patch), rap.ImageSegment(testPNG(t), "image/png")},
			}, nil
		})
	rap.AddTool(s, &rap.Tool{Name: "deploy", Description: "Deploys the service."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			// The default is not the first choice: Enter must answer the
			// default, not the first button.
			choices := []string{"production", "staging"}
			i, err := c.AskUser(ctx, "Deploy where?", choices, 1, waitFor)
			if err != nil {
				return nil, err
			}
			return rap.Text("deployed to " + choices[i]), nil
		})
	rap.AddTool(s, &rap.Tool{Name: "sign_up", Description: "Signs the user up for the newsletter."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			a, err := c.AskInput(ctx, "Your details for the newsletter", []rap.InputField{
				{Name: "email", Title: "Email", Description: "Where the newsletter goes", Type: rap.InputString, Required: true, Format: rap.FormatEmail},
				{Name: "copies", Title: "Copies", Type: rap.InputInteger, Minimum: new(1.0)},
				{Name: "weekly", Title: "Weekly", Type: rap.InputBoolean},
				{Name: "topic", Title: "Topic", Type: rap.InputEnum, Options: []string{"go", "rap"}, Default: json.RawMessage(`"rap"`), Required: true},
			}, waitFor)
			if err != nil {
				return nil, err
			}
			if a.Dismissed {
				return rap.Text("not signed up"), nil
			}
			b, _ := json.Marshal(a.Values)
			return rap.Text("signed up " + string(b)), nil
		})
	rap.AddTool(s, &rap.Tool{Name: "connect_calendar", Description: "Connects the user's calendar."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			if err := c.RequestOAuth(ctx, "https://auth.example.com/authorize?client=gorap"); err != nil {
				return nil, err
			}
			select {
			case <-authorized:
				return rap.Text("calendar connected"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	type countArgs struct {
		From int `json:"from"`
	}
	rap.AddSubscription(s, &rap.Tool{Name: "countdown", Description: "Counts down, one event per step."},
		func(ctx context.Context, sub *rap.Subscription, in countArgs) error {
			for n := in.From; n > 1; n-- {
				if err := sub.Emit(ctx, fmt.Sprintf(`{"n":%d}`, n)); err != nil {
					return err
				}
			}
			return sub.Final(ctx, `{"n":1}`, false)
		})
	return toolServer(t, s)
}

// testPNG is a small gradient image, base64.
func testPNG(t *testing.T) string {
	img := image.NewRGBA(image.Rect(0, 0, 160, 48))
	for x := range 160 {
		for y := range 48 {
			img.Set(x, y, color.RGBA{uint8(40 + x), uint8(90 + y*2), 200, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func call(name, args string) scripted.Call {
	return scripted.Call{Name: name, Arguments: json.RawMessage(args)}
}

// demoScript is the scripted model's side of the browser tests.
func demoScript() []scripted.Turn {
	return []scripted.Turn{
		summaryTurn,
		{AfterUser: "edit", Text: "Let me edit main.go.", ToolCalls: []scripted.Call{call("edit_file", `{"path":"main.go"}`)}},
		{When: &scripted.When{LastResultContains: "edited main.go", LastInput: "tool_result"}, Text: "Done: main.go now greets the world."},
		{AfterUser: "deploy", Text: "Where should it go?", ToolCalls: []scripted.Call{call("deploy", `{}`)}},
		{When: &scripted.When{LastResultContains: "deployed to", LastInput: "tool_result"}, Text: "Deployment finished: {{last_result}}."},
		{AfterUser: "sign me up", ToolCalls: []scripted.Call{call("sign_up", `{}`)}},
		{When: &scripted.When{LastResultContains: "signed up", LastInput: "tool_result"}, Text: "Result: {{last_result}}."},
		{AfterUser: "calendar", ToolCalls: []scripted.Call{call("connect_calendar", `{}`)}},
		// The runtime tells the model that authorization is in progress
		// (RAP OA-1); the result then arrives after that turn, as a note.
		{When: &scripted.When{UserContains: "asked the user to authorize", LastInput: "user"}, Text: "Please authorize the calendar with the link."},
		{When: &scripted.When{UserContains: "calendar connected", LastInput: "user"}, Text: "Your calendar is connected."},
		{AfterUser: "watch", Text: "Starting the countdown.", ToolCalls: []scripted.Call{call("countdown", `{"from":2}`)}},
		{When: &scripted.When{UserContains: "was started to handle", LastInput: "user"}, Text: "Handled a countdown event.", Repeat: true},
		{When: &scripted.When{LastResultContains: "Subscribed", LastInput: "tool_result"}, Text: "Subscribed to the countdown."},
		{AfterUser: "nap", ToolCalls: []scripted.Call{call("sleep", `{"seconds":3600,"reason":"waiting for the nightly build"}`)}},
		{AfterUser: "fail", Error: "the model is unreachable"},
	}
}

func newDemoStack(t *testing.T, authorized <-chan struct{}, token string) *stack {
	return newDemoStackModel(t, authorized, token, scripted.New(demoScript()))
}

// newDemoStackModel is newDemoStack with model m, such as the demo script
// reporting token usage (withUsage), and the runtime's config changed by
// tweaks, which see the demo tool server's URL in ToolServers.
func newDemoStackModel(t *testing.T, authorized <-chan struct{}, token string, m model.Provider, tweaks ...func(*runtime.Config)) *stack {
	return newStack(t, stackOptions{
		model: m,
		tools: []string{demoTools(t, authorized)},
		token: token,
		configs: func(c *runtime.Config) {
			c.DisplayText = func(tool, script string, args json.RawMessage) string {
				return display.Render(context.Background(), tool, script, args)
			}
			c.ModelRetry = runtime.ModelRetryPolicy{Initial: 10 * time.Millisecond, Attempts: 1}
			// A short conversation can be compacted on demand.
			c.Compaction.KeepLast = 2
			for _, tweak := range tweaks {
				tweak(c)
			}
		},
	})
}

// say types a message into the composer and sends it with Enter, as a
// person at the keyboard does.
func (b *browser) say(text string) {
	b.t.Helper()
	// The box is disabled while the previous message is being sent: the
	// runtime may announce that message before the send returns.
	b.wait("the message box enabled", `(() => { const i = document.getElementById('input'); return !!i && !i.disabled; })()`)
	b.run("type "+text, chromedp.Focus(chromedp.CSS("#input")), chromedp.SendKeys(chromedp.CSS("#input"), text), chromedp.KeyEvent(kb.Enter))
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// contains is an expression: the text of the elements matching sel
// contains want.
func contains(sel, want string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%s)].some(e => e.textContent.includes(%s))`, jsString(sel), jsString(want))
}

// A whole conversation in the browser: start a
// thread, send messages with the keyboard, see tool calls with their
// display text and results with their diff and image (RAP RE-3), a
// progress view (VU-1), answer a user choice (UC-1, UC-2), an OAuth link
// (OA-1), a subscription whose events run in child threads (SU-6) and
// follow one, a sleeping thread with its wake time, and a model error.
func TestBrowserConversation(t *testing.T) {
	authorized := make(chan struct{})
	st := newDemoStack(t, authorized, "")
	b := newBrowser(t, 1280, 860)

	b.run("open the page", chromedp.Navigate(st.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#new-thread")))
	// With no thread open there is no message box to type into (what
	// was typed there went nowhere).
	if eval[bool](b, `document.getElementById('input').checkVisibility()`) {
		t.Error("at / with no thread open the message box is shown")
	}
	b.run("start a thread", chromedp.Click(chromedp.CSS("#new-thread")))
	b.wait("the thread is open, replayed and live", `!document.getElementById('thread').hidden && document.getElementById('conn').dataset.state === 'live' && document.getElementById('conn').dataset.mode === 'replay'`)
	root := eval[string](b, `decodeURIComponent(location.hash.slice(4))`)
	if root == "" {
		t.Fatal("the page did not open the new thread")
	}
	b.wait("the tree lists the thread", fmt.Sprintf(`!!document.querySelector('#thread-tree a[data-thread=%s]')`, jsString(root)))
	// The skip link moves the focus to the message box and leaves the
	// address, which names the thread, as it is.
	eval[bool](b, `document.getElementById('new-thread').focus(); document.querySelector('a.skip').click(); true`)
	if hash, focused := eval[string](b, `location.hash`), eval[string](b, `document.activeElement.id`); hash != "#/t/"+root || focused != "input" {
		t.Errorf("after the skip link: address %q, focus on #%s; want #/t/%s and the message box", hash, focused, root)
	}

	// A tool call with its display text (RAP DS-2), its result's diff and
	// image, the progress view, and the reply. The user's text is shown
	// as text, never as HTML.
	b.say("please <b>edit</b> main.go")
	b.wait("the reply after the edit", contains(".msg.assistant", "Done: main.go now greets the world."))
	if got := b.text(`.call[data-call] .call-head code`); got != "Edit main.go" {
		t.Errorf("display text %q, want the display script's %q", got, "Edit main.go")
	}
	b.wait("the diff", contains(`.diff-block figcaption`, "main.go")+` && `+contains(`.diff .add`, "+// Greets the world.")+` && `+contains(`.diff .del`, "-// TODO: greet"))
	b.wait("the image is loaded", `[...document.querySelectorAll('img.result-image')].some(i => i.complete && i.naturalWidth === 160 && i.src.startsWith('data:image/png;base64,'))`)
	b.wait("the progress view", `document.querySelector('#views .view[data-view="build"] progress')?.value === 0.6 && `+contains(`#views .view`, "Compiling main.go"))
	bold := eval[int](b, `document.querySelectorAll('#messages b').length`)
	if !strings.Contains(b.text(".msg.user .text"), "<b>edit</b>") || bold != 0 {
		t.Errorf("the user's text was rendered as HTML (%d <b> elements)", bold)
	}
	b.screenshot("webui-tool-result")

	// A user choice, answered with the keyboard: the default choice (the
	// second button) has the focus, Enter picks it.
	b.say("deploy it")
	b.wait("the choice picker", contains(`.choice .prompt`, "Deploy where?"))
	b.wait("the default choice has the focus", `document.activeElement && document.activeElement.closest('.choice') && document.activeElement.textContent.startsWith('staging')`)
	b.screenshot("webui-user-choice")
	b.run("answer with Enter", chromedp.KeyEvent(kb.Enter))
	b.wait("the result of the choice", contains(".msg.assistant", "Deployment finished: deployed to staging."))
	b.wait("the picker is gone", `!document.querySelector('.choice')`)

	// An OAuth link, shown until the call's result arrives.
	b.say("connect my calendar")
	b.wait("the OAuth link", `document.querySelector('#oauth a')?.href === 'https://auth.example.com/authorize?client=gorap'`)
	rel := eval[string](b, `document.querySelector('#oauth a').rel`)
	if !strings.Contains(rel, "noopener") || !strings.Contains(rel, "noreferrer") {
		t.Errorf("the OAuth link's rel is %q", rel)
	}
	// Authorize only once the model answered the runtime's note: a turn
	// that starts after the result arrived sees the note and the result
	// together, and the script answers only the note.
	b.wait("the answer to the authorization note", contains(".msg.assistant", "Please authorize the calendar with the link."))
	close(authorized)
	b.wait("the calendar reply", contains(".msg.assistant", "Your calendar is connected."))
	b.wait("the OAuth link is gone", `!document.querySelector('#oauth a')`)

	// A subscription: its events are handled in child threads, listed
	// under the subscription and in the tree; follow one.
	b.say("watch the countdown")
	b.wait("two event threads", `document.querySelectorAll('#messages a[data-child]').length === 2`)
	b.wait("the subscription and its event threads", `document.querySelectorAll('#thread-info .subscription a[data-thread-link]').length === 2`)
	b.wait("the tree nests the children", fmt.Sprintf(`document.querySelectorAll('#thread-tree a[data-thread=%s] + ul a').length === 2`, jsString(root)))
	b.screenshot("webui-subscription")
	child := eval[string](b, `document.querySelector('#messages a[data-child]').dataset.child`)
	b.run("follow the child", chromedp.Click(chromedp.CSS(`#messages a[data-child]`)))
	b.wait("the child thread", fmt.Sprintf(`location.hash === '#/t/' + %s && document.getElementById('thread-title').title === %s`, jsString(child), jsString(child)))
	b.wait("the child's own reply", contains(".msg.assistant", "Handled a countdown event."))
	b.wait("the event note", contains(".msg.note", "was started to handle"))
	b.wait("the inherited history, folded", contains(".inherited summary", "Inherited")+` && `+contains(".inherited .msg.user", "deploy it"))
	b.wait("the link to the parent", fmt.Sprintf(`document.querySelector('#thread-info .parent a')?.dataset.threadLink === %s`, jsString(root)))
	b.screenshot("webui-child-thread")

	// Back to the session: a sleep with its wake time, then a model error.
	b.run("back to the parent", chromedp.Focus(chromedp.CSS(`#thread-info .parent a`)), chromedp.KeyEvent(kb.Enter))
	b.wait("the session again", fmt.Sprintf(`document.getElementById('thread-title').title === %s && document.querySelectorAll('.msg.user').length >= 4`, jsString(root)))
	b.say("take a nap")
	b.wait("the sleep and its wake time", contains("#thread-info .sleeping", "Sleeping until")+` && `+contains("#thread-info .sleeping", "waiting for the nightly build")+` && !!document.querySelector('#thread-info .sleeping time')`)
	b.say("fail now")
	b.wait("the model error", contains(".msg.error", "the model is unreachable")+` && !!document.querySelector('.msg.error[data-final]')`)
	// The runtime keeps the message whose completion failed (RAP RT-4)
	// and announced it when it took it: it is shown once, before the error.
	b.wait("the failed message, then the error", `(() => {
		const u = [...document.querySelectorAll('#messages > .msg.user .text')].filter((e) => e.textContent === 'fail now');
		const err = document.querySelector('.msg.error[data-final]');
		return u.length === 1 && !!err && !!(u[0].compareDocumentPosition(err) & Node.DOCUMENT_POSITION_FOLLOWING);
	})()`)
	b.screenshot("webui-error")

	// Every message appears once.
	users := eval[[]string](b, `[...document.querySelectorAll('#messages > .msg.user:not([data-queued]) .text')].map(e => e.textContent)`)
	want := []string{"please <b>edit</b> main.go", "deploy it", "connect my calendar", "watch the countdown", "take a nap", "fail now"}
	if strings.Join(users, "|") != strings.Join(want, "|") {
		t.Errorf("user messages shown: %q, want %q", users, want)
	}
}
