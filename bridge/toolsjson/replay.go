package toolsjson

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/gorap/gorap/rap"
)

// Replay answers calls from a recorded trace: a call
// whose tool id and input match a recorded CT_TOOL_CALL gets the recorded
// CT_TOOL_RESULT, byte for byte, and nothing runs.
type Replay struct {
	// results maps tool id + canonical input to the recorded results in
	// order; repeated identical calls replay them in turn, then the last.
	results map[string][]Frame
	next    map[string]int
	tools   map[string]bool
	mu      sync.Mutex
}

// LoadReplay reads a trace file.
func LoadReplay(path string) (*Replay, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	r := &Replay{results: map[string][]Frame{}, next: map[string]int{}, tools: map[string]bool{}}
	calls := map[string]Frame{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 2*MaxOutputBytes)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var f Frame
		if err := json.Unmarshal(line, &f); err != nil {
			return nil, fmt.Errorf("%s:%d: not a trace frame: %v", path, n, err)
		}
		r.tools[f.ToolID] = true
		switch f.Type {
		case FrameToolCall:
			calls[f.CallID] = f
		case FrameToolResult:
			call, ok := calls[f.CallID]
			if !ok {
				continue // a denied confirmation: no call frame
			}
			k := replayKey(f.ToolID, call.Payload)
			r.results[k] = append(r.results[k], f)
		default:
			return nil, fmt.Errorf("%s:%d: unknown frame type %q", path, n, f.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read trace %s: %w", path, err)
	}
	return r, nil
}

// Missing lists the tool ids the trace records that b does not serve.
func (r *Replay) Missing(b *Bundle) []string {
	have := map[string]bool{}
	for _, t := range b.Tools {
		have[t.ID] = true
	}
	var out []string
	for id := range r.tools {
		if !have[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func replayKey(toolID string, input json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber() // compare numbers exactly
	if err := dec.Decode(&v); err != nil {
		return toolID + "\x00" + string(input)
	}
	canon, _ := json.Marshal(v) // maps marshal with sorted keys
	return toolID + "\x00" + string(canon)
}

// answer returns the recorded result of a call. Handlers run concurrently,
// so the per-input position is guarded by mu.
func (r *Replay) answer(t *Tool, args json.RawMessage) (*rap.Reply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := replayKey(t.ID, args)
	fs := r.results[k]
	if len(fs) == 0 {
		return nil, fmt.Errorf("Error: replay: the trace has no recorded result for tool %q with these arguments; nothing was run. Replay serves only calls recorded in the trace", t.ID)
	}
	i := r.next[k]
	if i >= len(fs) {
		i = len(fs) - 1
	} else {
		r.next[k] = i + 1
	}
	f := fs[i]
	if f.Error != "" {
		return nil, errors.New(f.Error)
	}
	return rap.Text(string(f.Payload)), nil
}
