package termchat

import (
	"fmt"
	"io"
	"strconv"

	"github.com/gorap/gorap/runtime/api"
)

// printThreadTree prints the thread tree built from parent_id: every
// session, or only the session of thread only when it is set. mark is
// labelled as the chat's own thread.
func printThreadTree(w io.Writer, threads []api.Thread, only, mark string) error {
	byID := make(map[string]api.Thread, len(threads))
	kids := map[string][]string{}
	for _, th := range threads {
		byID[th.ID] = th
	}
	var roots []string
	for _, th := range threads {
		if _, ok := byID[th.ParentID]; th.ParentID != "" && ok {
			kids[th.ParentID] = append(kids[th.ParentID], th.ID)
		} else {
			roots = append(roots, th.ID) // a session, or an orphan shown as one
		}
	}
	if only != "" {
		th, ok := byID[only]
		if !ok {
			return fmt.Errorf("thread %q is not in GET /v1/threads; list the threads with 'rap chat --tree'", only)
		}
		seen := map[string]bool{}
		for th.ParentID != "" && !seen[th.ID] {
			seen[th.ID] = true
			p, ok := byID[th.ParentID]
			if !ok {
				break
			}
			th = p
		}
		roots = []string{th.ID}
	}
	if len(roots) == 0 {
		fmt.Fprintln(w, "no threads yet: start one with 'rap chat'")
		return nil
	}
	lines := 0
	visited := map[string]bool{}
	var walk func(id, indent, branch string, depth int)
	walk = func(id, indent, branch string, depth int) {
		if visited[id] {
			return
		}
		visited[id] = true
		if lines == maxTreeLines {
			fmt.Fprintf(w, "%s… more threads not shown (over %d)\n", indent, maxTreeLines)
		}
		lines++
		if lines > maxTreeLines {
			return
		}
		th := byID[id]
		fmt.Fprintf(w, "%s%s%s\n", indent, branch, threadLine(th, mark))
		children := kids[id]
		if len(children) == 0 {
			return
		}
		next := indent
		switch branch {
		case "├─ ":
			next += "│  "
		case "└─ ":
			next += "   "
		}
		if depth >= maxTreeDepth {
			fmt.Fprintf(w, "%s└─ … %s deeper than %d levels not shown\n", next, plural(len(children), "child thread"), maxTreeDepth)
			return
		}
		for i, k := range children {
			b := "├─ "
			if i == len(children)-1 {
				b = "└─ "
			}
			walk(k, next, b, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, "", "", 0)
	}
	return nil
}

// threadLine is one thread of the tree: id, status and origin, and a
// session's title in quotes.
func threadLine(th api.Thread, mark string) string {
	origin := "session"
	if th.ParentID == "" && th.Title != "" {
		origin += " " + strconv.Quote(oneLine(clean(th.Title), 80))
	}
	switch {
	case th.ParentID == "":
	case th.OriginTool == toolSpawnThread:
		origin = "spawn_thread"
	case th.OriginTool != "":
		origin = "event of " + th.OriginTool
	default:
		origin = "child"
	}
	if th.ParentID != "" && th.OriginCallID != "" {
		origin += " (call " + th.OriginCallID + ")"
	}
	line := oneLine(clean(th.ID), 100) + "  " + oneLine(clean(orNone(string(th.Status))), 40) + "  " + oneLine(clean(origin), 200)
	if th.ID == mark {
		line += "  ← this chat"
	}
	return line
}
