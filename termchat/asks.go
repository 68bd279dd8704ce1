package termchat

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
)

// pendingCalls returns the ids of tool calls in msgs that have no result yet.
func pendingCalls(msgs []api.Message) map[string]string {
	pending := map[string]string{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			pending[c.ID] = c.Name
		}
	}
	for _, m := range msgs {
		for _, r := range m.ToolResults {
			delete(pending, r.CallID)
		}
	}
	return pending
}

// userAsks tracks what the tools of the followed threads wait for from the
// user: open user choices (RAP UC-1), in the order they were asked, and
// authorizations (RAP OA-1). It is safe for concurrent use.
type userAsks struct {
	mu      sync.Mutex
	choices []openChoice
	auth    map[string]string // thread+"\x00"+call → tool name
	added   int               // asks seen so far
}

func askKey(threadID, callID string) string { return threadID + "\x00" + callID }

// note updates the asks from an event of thread threadID.
func (a *userAsks) note(threadID string, ev Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch ev.Type {
	case "user_choice", "user_input":
		c, ok := decodeChoice(ev.Data)
		if ev.Type == "user_input" {
			c, ok = decodeInput(ev.Data)
		}
		if !ok {
			return
		}
		for _, o := range a.choices {
			if o.threadID == threadID && o.callID == c.callID {
				return
			}
		}
		c.threadID = threadID
		a.choices = append(a.choices, c)
		a.added++
	case "oauth":
		var o struct {
			CallID string `json:"call_id"`
			Name   string `json:"name"`
		}
		if json.Unmarshal(ev.Data, &o) != nil || o.CallID == "" {
			return
		}
		if a.auth == nil {
			a.auth = map[string]string{}
		}
		if _, ok := a.auth[askKey(threadID, o.CallID)]; !ok {
			a.auth[askKey(threadID, o.CallID)] = o.Name
			a.added++
		}
	case "choice_answered", "input_answered":
		var c struct {
			CallID string `json:"call_id"`
		}
		if json.Unmarshal(ev.Data, &c) == nil {
			a.dropLocked(threadID, c.CallID, false)
		}
	case "tool_result":
		var r struct {
			CallID string `json:"call_id"`
		}
		if json.Unmarshal(ev.Data, &r) == nil {
			a.dropLocked(threadID, r.CallID, true)
		}
	case "message":
		var m api.Message
		if json.Unmarshal(ev.Data, &m) == nil {
			for _, r := range m.ToolResults {
				a.dropLocked(threadID, r.CallID, true)
			}
		}
	case "thread_closed":
		var c struct {
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(ev.Data, &c) == nil && c.ThreadID == threadID {
			kept := a.choices[:0]
			for _, o := range a.choices {
				if o.threadID != threadID {
					kept = append(kept, o)
				}
			}
			a.choices = kept
			for k := range a.auth {
				if strings.HasPrefix(k, threadID+"\x00") {
					delete(a.auth, k)
				}
			}
		}
	}
}

// drop forgets the choice of a call (answered, or no longer open).
func (a *userAsks) drop(threadID, callID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropLocked(threadID, callID, false)
}

func (a *userAsks) dropLocked(threadID, callID string, auth bool) {
	for i, o := range a.choices {
		if o.threadID == threadID && o.callID == callID {
			a.choices = append(a.choices[:i:i], a.choices[i+1:]...)
			break
		}
	}
	if auth {
		delete(a.auth, askKey(threadID, callID))
	}
}

// next returns the oldest open choice.
func (a *userAsks) next() (openChoice, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.choices) == 0 {
		return openChoice{}, false
	}
	return a.choices[0], true
}

// count returns how many asks are open and how many were seen in all.
func (a *userAsks) count() (open, added int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.choices) + len(a.auth), a.added
}

// describe names the open asks, for the end of a chat.
func (a *userAsks) describe() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, c := range a.choices {
		what := "choice"
		if c.fields != nil {
			what = "input"
		}
		out = append(out, fmt.Sprintf("%s waits for your %s (thread %s)", toolLabel(c.tool), what, c.threadID))
	}
	keys := make([]string, 0, len(a.auth))
	for k := range a.auth {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		th, _, _ := strings.Cut(k, "\x00")
		out = append(out, fmt.Sprintf("%s waits for your authorization (thread %s)", toolLabel(a.auth[k]), th))
	}
	return out
}

// parseChoiceAnswer reads the user's answer to a choice of n options:
// a number from 1 to n, or "d" or an empty line to dismiss it. It returns
// the 0-based index, or nil for a dismissal.
func parseChoiceAnswer(text string, n int) (*int, error) {
	text = strings.TrimSpace(text)
	if text == "" || strings.EqualFold(text, "d") {
		return nil, nil
	}
	k, err := strconv.Atoi(text)
	if err != nil || k < 1 || k > n {
		return nil, fmt.Errorf("%q is not an answer: type a number from 1 to %d, or d (or an empty line) to dismiss the question", oneLine(text, 40), n)
	}
	k--
	return &k, nil
}

// openChoice is a user choice waiting for its answer, or a user input
// (the user_input gorap extension) when fields is set.
type openChoice struct {
	threadID, callID, tool, prompt string
	choices                        []string
	def                            int
	fields                         []rap.InputField
}

// decodeChoice reads the data of a user_choice event.
func decodeChoice(data json.RawMessage) (openChoice, bool) {
	var c struct {
		CallID  string   `json:"call_id"`
		Name    string   `json:"name"`
		Prompt  string   `json:"prompt"`
		Choices []string `json:"choices"`
		Default int      `json:"default"`
	}
	if json.Unmarshal(data, &c) != nil || c.CallID == "" || len(c.Choices) == 0 || c.Default < 0 || c.Default >= len(c.Choices) {
		return openChoice{}, false
	}
	return openChoice{callID: c.CallID, tool: c.Name, prompt: c.Prompt, choices: c.Choices, def: c.Default}, true
}
