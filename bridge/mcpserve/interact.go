package mcpserve

// This file owns what a tool asks of the user while its call runs: a
// user_choice (RAP UC-1, UC-2) becomes an MCP form elicitation, an oauth
// link (RAP OA-1) a URL-mode elicitation.

import (
	"context"
	"fmt"
	"net"
	"net/url"

	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// choiceField is the one field of the form a user_choice becomes.
const choiceField = "choice"

// askUser answers a user_choice: with the user's pick when the client
// supports form elicitation and the user accepts, and otherwise with the
// choice's default, as a dismissal does (RAP UC-2). The answer is POSTed
// to the choice's response_url, which must be on the tool server's own
// host and port, as the runtime requires.
func (c *callState) askUser(ctx context.Context, end context.CancelCauseFunc, m *rap.UserChoice) {
	name := c.e.tool.Tool.Name
	if problem := checkResponseURL(m.ResponseURL, c.e.tool.Endpoint); problem != "" {
		c.s.log.Warn("mcpserve: user_choice refused: response_url "+problem, "tool", name)
		c.endEarly(end, errorResult(fmt.Sprintf("Error: %q asked the user a question whose answer would go elsewhere than to its own server (its response_url %s), so the question was not asked and the call was cancelled.", name, problem)))
		return
	}
	labels := uniqueLabels(m.Choices)
	sel, how := m.Default, "dismissed: the MCP client does not support form elicitation"
	if supportsForm(c.req) {
		res, err := c.elicit(ctx, &mcp.ElicitParams{
			Mode:    "form",
			Message: fmt.Sprintf("%s (asked by the tool %s)", m.Prompt, name),
			RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{choiceField: map[string]any{
					"type": "string", "title": "Your choice", "enum": labels, "default": labels[m.Default],
				}},
				"required": []string{choiceField},
			},
		})
		switch {
		case ctx.Err() != nil:
			return // the call ended meanwhile
		case err != nil:
			how = "dismissed: the elicitation failed: " + err.Error()
		case res.Action != "accept":
			how = "dismissed: the user chose " + res.Action
		default:
			picked, _ := res.Content[choiceField].(string)
			i := indexOf(labels, picked)
			if i < 0 {
				how = fmt.Sprintf("dismissed: the answer %q is none of the choices", truncate(picked, 100))
			} else {
				sel, how = i, "answered"
			}
		}
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	if err := c.s.rt.Choose(pctx, m, sel); err != nil {
		c.s.log.Warn("mcpserve: answering a user_choice failed", "tool", name, "selected", sel, "err", withoutRaptestPrefix(err))
		return
	}
	c.s.log.Info("mcpserve: user_choice answered", "tool", name, "selected", sel, "how", how)
}

// elicit sends an elicitation request. For a call that runs as an MCP
// task, the request names the task (_meta related-task) and the task is
// input_required until the answer comes.
func (c *callState) elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if c.task == nil {
		return c.req.Session.Elicit(ctx, p)
	}
	p.Meta = mcp.Meta{relatedTaskKey: map[string]any{"taskId": c.task.id}}
	c.task.setStatus(taskInputRequired, "waiting for the user: "+truncate(p.Message, maxViewText))
	defer c.task.setStatus(taskWorking, "")
	return c.req.Session.Elicit(ctx, p)
}

// supportsForm reports whether the client takes form elicitations: it
// advertised elicitation with form mode, or without modes (form is then
// implied).
func supportsForm(req *mcp.CallToolRequest) bool {
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	e := caps.Elicitation
	return e.Form != nil || e.URL == nil
}

// supportsURL reports whether the client takes URL-mode elicitations.
func supportsURL(req *mcp.CallToolRequest) bool {
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// showAuth shows an oauth link (RAP OA-1): as a URL-mode elicitation when
// the client supports it, else in a progress notification when the client
// gave a progress token; a client with neither gets the link as the
// call's result, and the call is cancelled. The link is never logged.
func (c *callState) showAuth(ctx context.Context, end context.CancelCauseFunc, m *rap.OAuth) {
	name := c.e.tool.Tool.Name
	if problem := rap.CheckAuthURL(m.AuthURL); problem != "" {
		c.s.log.Warn("mcpserve: oauth refused: auth_url "+problem, "tool", name)
		c.endEarly(end, errorResult(fmt.Sprintf("Error: %q asked the user to sign in with a link that %s, so the link was not shown and the call was cancelled.", name, problem)))
		return
	}
	msg := fmt.Sprintf("The tool %s needs you to sign in. Open the link; the call goes on once you have signed in.", name)
	switch {
	case supportsURL(c.req):
		id := randomHex(16)
		res, err := c.elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: msg, URL: m.AuthURL, ElicitationID: id})
		switch {
		case ctx.Err() != nil:
		case err != nil:
			c.s.log.Warn("mcpserve: URL elicitation failed", "tool", name, "err", err)
			c.endEarly(end, signInResult(name, m.AuthURL))
		case res.Action != "accept":
			c.endEarly(end, errorResult(fmt.Sprintf("Error: the user did not sign in for %q (%s), so the call was cancelled.", name, res.Action)))
		default:
			c.mu.Lock()
			c.elicitURLs = append(c.elicitURLs, id)
			c.mu.Unlock()
		}
	case c.token != nil:
		c.notify(ctx, 0, 0, msg+" "+m.AuthURL)
	default:
		c.endEarly(end, signInResult(name, m.AuthURL))
	}
}

// signInResult is the result of a call whose sign-in link could not be
// shown otherwise.
func signInResult(name, authURL string) *mcp.CallToolResult {
	return errorResult(fmt.Sprintf("Error: %q needs the user to sign in first. Open %s in a browser, sign in, then call %s again.", name, authURL, name))
}

// completeElicitations tells the client that the URL elicitations of the
// call are over: its result came, so the sign-in happened.
func (c *callState) completeElicitations(ctx context.Context) {
	c.mu.Lock()
	ids := c.elicitURLs
	c.elicitURLs = nil
	c.mu.Unlock()
	for _, id := range ids {
		_ = c.req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: id})
	}
}

// uniqueLabels returns the choices as the enum of a form: an enum's
// values must differ, so a repeated label gets " (2)", " (3)"...
func uniqueLabels(choices []string) []string {
	out := make([]string, len(choices))
	seen := map[string]bool{}
	for i, l := range choices {
		label := l
		for n := 2; seen[label]; n++ {
			label = fmt.Sprintf("%s (%d)", l, n)
		}
		seen[label] = true
		out[i] = label
	}
	return out
}

func indexOf(labels []string, s string) int {
	for i, l := range labels {
		if l == s {
			return i
		}
	}
	return -1
}

// checkResponseURL returns what is wrong with a user_choice response_url,
// or "": it must be an http(s) URL on the host and port of the tool's
// endpoint, as the runtime requires, so that a tool cannot aim this
// process's requests at another server.
func checkResponseURL(raw, endpoint string) string {
	if p := rap.CheckAuthURL(raw); p != "" {
		return p
	}
	if rap.SameHostPort(raw, endpoint) {
		return ""
	}
	u, _ := url.Parse(raw)
	h, p := rap.HostPort(u)
	where := "cannot be checked against the tool's endpoint"
	if ep, err := url.Parse(endpoint); err == nil {
		eh, epPort := rap.HostPort(ep)
		where = fmt.Sprintf("is on %s, not on the tool's own host %s", net.JoinHostPort(h, p), net.JoinHostPort(eh, epPort))
	}
	return where
}
