package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"
)

// A hand-written stdio MCP server that runs tools as tasks (SEP-1686):
// the MCP Go SDK has no server side for tasks. Its task state lives in
// files under a directory, so that a task outlives a restart of the
// server process (the bridge restarts it with itself). It also plays the
// hostile or buggy server: an unknown task id, a task that never ends, a
// malformed tasks/get answer, an oversized result.

const (
	// envTaskServer (a directory) makes the test binary the task server.
	envTaskServer = "GORAP_MCP_TEST_TASK_SERVER"
	// envTaskBridge (a directory) makes the test binary a bridge to the
	// task server, with its durable store in that directory, serving RAP
	// on a free port it prints; a test SIGKILLs it mid-task.
	envTaskBridge = "GORAP_MCP_TEST_TASK_BRIDGE"
)

// taskFile is a task's state on disk.
type taskFile struct {
	Tool   string    `json:"tool"`
	DoneAt time.Time `json:"done_at"`
}

func runTaskServer(dir string) {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	send := func(id json.RawMessage, result any, code int, msg string) {
		m := map[string]any{"jsonrpc": "2.0", "id": id}
		if code != 0 {
			m["error"] = map[string]any{"code": code, "message": msg}
		} else {
			m["result"] = result
		}
		raw, _ := json.Marshal(m)
		mu.Lock()
		defer mu.Unlock()
		out.Write(raw)
		out.WriteByte('\n')
		out.Flush()
	}
	task := func(id, status, msg string) map[string]any {
		poll := 30
		if strings.HasPrefix(id, "notify-") {
			poll = 60000 // the client learns of the end by notification
		}
		return map[string]any{"taskId": id, "status": status, "statusMessage": msg, "pollInterval": poll, "ttl": 60000,
			"createdAt": time.Now().UTC().Format(time.RFC3339), "lastUpdatedAt": time.Now().UTC().Format(time.RFC3339)}
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{"ms": map[string]any{"type": "integer"}}}
	var tools []any
	for _, name := range []string{"slow", "never", "malformed", "big", "ghost", "notify"} {
		tools = append(tools, map[string]any{"name": name, "inputSchema": schema, "execution": map[string]any{"taskSupport": "required"}})
	}
	tools = append(tools, map[string]any{"name": "plain", "inputSchema": schema})
	n := 0
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string           `json:"name"`
				Arguments struct{ MS int } `json:"arguments"`
				Task      json.RawMessage  `json:"task"`
				TaskID    string           `json:"taskId"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			continue // a notification or a response
		}
		p := m.Params
		path := filepath.Join(dir, "task-"+filepath.Base(p.TaskID))
		switch m.Method {
		case "initialize":
			send(m.ID, map[string]any{"protocolVersion": "2025-11-25", "serverInfo": map[string]any{"name": "tasks", "version": "1"},
				"capabilities": map[string]any{"tools": map[string]any{}, "tasks": map[string]any{"cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}}}, 0, "")
		case "ping":
			send(m.ID, map[string]any{}, 0, "")
		case "tools/list":
			send(m.ID, map[string]any{"tools": tools}, 0, "")
		case "tools/call":
			if p.Name == "plain" {
				send(m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "plain ok"}}}, 0, "")
				continue
			}
			if p.Task == nil {
				send(m.ID, nil, -32600, "this tool runs only as a task")
				continue
			}
			n++
			id := fmt.Sprintf("%s-%d-%d", p.Name, os.Getpid(), n)
			if p.Name != "ghost" {
				raw, _ := json.Marshal(taskFile{Tool: p.Name, DoneAt: time.Now().Add(time.Duration(p.Arguments.MS) * time.Millisecond)})
				_ = os.WriteFile(filepath.Join(dir, "task-"+id), raw, 0o600)
			}
			send(m.ID, map[string]any{"task": task(id, "working", "")}, 0, "")
			if p.Name == "notify" {
				go func(ms int) {
					time.Sleep(time.Duration(ms) * time.Millisecond)
					raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task(id, "completed", "done")})
					mu.Lock()
					defer mu.Unlock()
					out.Write(raw)
					out.WriteByte('\n')
					out.Flush()
				}(p.Arguments.MS)
			}
		case "tasks/get", "tasks/result", "tasks/cancel":
			raw, err := os.ReadFile(path)
			var tf taskFile
			if err != nil || json.Unmarshal(raw, &tf) != nil {
				send(m.ID, nil, -32602, "unknown task "+p.TaskID)
				continue
			}
			_, cerr := os.Stat(path + ".cancelled")
			cancelled := cerr == nil
			switch {
			case m.Method == "tasks/cancel":
				_ = os.WriteFile(path+".cancelled", nil, 0o600)
				send(m.ID, task(p.TaskID, "cancelled", "cancelled by the client"), 0, "")
			case m.Method == "tasks/result" && tf.Tool == "big":
				send(m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("x", 5<<20)}}}, 0, "")
			case m.Method == "tasks/result":
				f, _ := os.OpenFile(path+".results", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
				f.WriteString("x")
				f.Close()
				send(m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "result of " + tf.Tool}}}, 0, "")
			case tf.Tool == "malformed":
				send(m.ID, "garbage", 0, "")
			case cancelled:
				send(m.ID, task(p.TaskID, "cancelled", "cancelled by the client"), 0, "")
			case tf.Tool == "never" || time.Now().Before(tf.DoneAt):
				send(m.ID, task(p.TaskID, "working", "step "+time.Now().Format("15:04:05.0")), 0, "")
			default:
				send(m.ID, task(p.TaskID, "completed", "done"), 0, "")
			}
		default:
			send(m.ID, nil, -32601, "method not found: "+m.Method)
		}
	}
}

// taskServerOptions are bridge options for the task server in dir.
func taskServerOptions(dir string) Options {
	exe, _ := os.Executable()
	return Options{Name: "tasks", Command: []string{exe, "-test.run=^$"}, Env: []string{envTaskServer + "=" + dir, envTaskBridge + "="},
		Logger: quietLogger(), MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, TerminateWait: 300 * time.Millisecond}
}

// runTaskBridgeHelper serves a bridge to the task server in dir, with
// its durable store there, and prints its URL; it runs until killed.
func runTaskBridgeHelper(dir string) {
	st, err := durable.Open(filepath.Join(dir, "bridge.db"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opts := taskServerOptions(dir)
	opts.Server = &rap.ServerOptions{Store: st}
	b, err := New(&opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := b.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	_ = http.Serve(ln, b)
	os.Exit(2)
}
