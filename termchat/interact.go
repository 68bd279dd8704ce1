package termchat

import (
	"encoding/json"
	"fmt"
	"strings"
)

// oauth shows a tool's authorization link (RAP OA-1), once per call and
// link. It is printed for the user and never logged.
func (t *transcript) oauth(data json.RawMessage) {
	var a struct {
		CallID  string `json:"call_id"`
		Name    string `json:"name"`
		AuthURL string `json:"auth_url"`
	}
	if json.Unmarshal(data, &a) != nil || a.AuthURL == "" {
		return
	}
	if t.auth[a.CallID] == a.AuthURL {
		return
	}
	t.auth[a.CallID] = a.AuthURL
	t.printf("  🔐 %s needs your authorization; its call waits until you grant it.\n", toolLabel(a.Name))
	fmt.Fprintf(t.w, "     Authorize at: %s\n", oneLine(clean(a.AuthURL), maxAuthURL))
}

// userChoice shows a tool's question as a numbered picker (RAP UC-1),
// once per call.
func (t *transcript) userChoice(data json.RawMessage) {
	c, ok := decodeChoice(data)
	if !ok {
		return
	}
	if _, shown := t.choices[c.callID]; shown {
		return
	}
	t.choices[c.callID] = shownChoice{tool: c.tool, choices: c.choices, def: c.def}
	prompt := shorten(clean(c.prompt), 20, maxPromptChars)
	lines := strings.Split(prompt, "\n")
	t.printf("  ? %s asks: %s\n", toolLabel(c.tool), lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(t.w, "      %s\n", l)
	}
	for i, ch := range c.choices {
		if i == maxShownChoices {
			fmt.Fprintf(t.w, "      … %d more choices not shown\n", len(c.choices)-i)
			break
		}
		def := ""
		if i == c.def {
			def = "  (default)"
		}
		fmt.Fprintf(t.w, "      %d) %s%s\n", i+1, oneLine(clean(ch), 200), def)
	}
	fmt.Fprintf(t.w, "    Answer with a number from 1 to %d; d or an empty line dismisses the question (the tool then gets %d).\n", len(c.choices), c.def+1)
}

// choiceAnswered shows the answer of a user choice, from this client or
// another one.
func (t *transcript) choiceAnswered(data json.RawMessage) {
	var a struct {
		CallID    string `json:"call_id"`
		Selected  int    `json:"selected"`
		Dismissed bool   `json:"dismissed"`
	}
	if json.Unmarshal(data, &a) != nil {
		return
	}
	c, known := t.choices[a.CallID]
	label := fmt.Sprintf("choice %d", a.Selected+1)
	if known && a.Selected >= 0 && a.Selected < len(c.choices) {
		label = fmt.Sprintf("%d) %s", a.Selected+1, oneLine(clean(c.choices[a.Selected]), 200))
	}
	who := "the question of call " + a.CallID
	if known {
		who = toolLabel(c.tool) + "'s question"
	}
	if a.Dismissed {
		t.printf("  · %s was dismissed; the tool gets its default, %s\n", who, label)
		return
	}
	t.printf("  · %s answered: %s\n", who, label)
}
