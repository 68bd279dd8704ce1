package rap

// RemoveTool removes the tool named name from the server and reports
// whether it was there. Later invocations of it get the ordinary
// "unknown operation" error result (RAP IN-3); calls already running
// finish normally. Bridges whose tool lists change at run time (such as
// an MCP server's notifications/tools/list_changed) pair it with
// AddRawTool.
func (s *Server) RemoveTool(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tools[name]; !ok {
		return false
	}
	delete(s.tools, name)
	for i, n := range s.order {
		if n == name {
			s.order = append(s.order[:i:i], s.order[i+1:]...)
			break
		}
	}
	return true
}
