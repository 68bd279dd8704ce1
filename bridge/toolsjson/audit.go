package toolsjson

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// AuditCapDenied is the kind of an audit record written when a tool is
// denied a capability or a secret.
const AuditCapDenied = "cap_denied"

// AuditRecord is one line of the audit log.
type AuditRecord struct {
	Time       string   `json:"ts"`
	Kind       string   `json:"kind"`
	ToolID     string   `json:"tool_id"`
	Capability string   `json:"capability,omitempty"`
	Secret     string   `json:"secret,omitempty"` // the id, never the value
	Path       string   `json:"path,omitempty"`
	Reason     string   `json:"reason"`
	Tags       []string `json:"tags,omitempty"`
}

// auditLog writes records as JSON lines.
type auditLog struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

func (a *auditLog) write(r AuditRecord) {
	if a == nil || a.w == nil {
		return
	}
	r.Time = a.now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(r)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _ = a.w.Write(append(line, '\n'))
}
