package toolsjson

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gorap/gorap/internal/privfile"
)

// Frame types of a trace.
const (
	FrameToolCall   = "CT_TOOL_CALL"
	FrameToolResult = "CT_TOOL_RESULT"
)

// Frame is one line of a trace file.
type Frame struct {
	Type string `json:"type"`
	// ToolID is the tools.json id (mail.smtp_send), never the RAP name.
	ToolID string `json:"tool_id"`
	// CallID is the RAP invocation id; the call and result frames of a
	// call share it.
	CallID       string          `json:"call_id"`
	InputSchema  string          `json:"input_schema"`
	ResultSchema string          `json:"result_schema"`
	Time         string          `json:"ts"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	// Error is the error text of a failed call (CT_TOOL_RESULT only).
	Error      string   `json:"error,omitempty"`
	DurationMS *int64   `json:"duration_ms,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	Budget     *Budget  `json:"budget,omitempty"`
}

// tracer appends frames to one per-session trace file.
type tracer struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

// newTracer creates dir (private) and a new session trace file in it.
func newTracer(dir string, now time.Time) (*tracer, error) {
	if err := privfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("create trace dir %s: %w", dir, err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	p := filepath.Join(dir, fmt.Sprintf("session-%s-%s.jsonl", now.UTC().Format("20060102T150405Z"), hex.EncodeToString(rnd[:])))
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create trace file: %w", err)
	}
	return &tracer{f: f, path: p}, nil
}

func (t *tracer) write(fr Frame) error {
	if t == nil {
		return nil
	}
	line, err := json.Marshal(fr)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err = t.f.Write(append(line, '\n'))
	return err
}

func (t *tracer) close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.f.Close()
}
