package config_test

import (
	"flag"
	"fmt"

	"github.com/gorap/gorap/runtime/config"
)

// A tool-server file in the reference runtime's format (RAP CF-1).
func ExampleParse() {
	f, err := config.Parse([]byte(`{"tool_sets": [
		{"type": "toolset_server", "server_url": "http://127.0.0.1:3001"},
		{"type": "toolset_server", "server_url": "http://127.0.0.1:3002/"}
	]}`), "rap.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.ServerURLs())

	f, err = config.Parse([]byte(`{"tool_sets": [{"type": "mcp_server", "name": "git", "command": ["mcp-git"]}]}`), "rap.json")
	fmt.Println(f.MCPServers()[0].MCP.Name, f.MCPServers()[0].MCP.Command, err)
	// Output:
	// [http://127.0.0.1:3001 http://127.0.0.1:3002]
	// git [mcp-git] <nil>
}

// Flags override environment variables, which override the defaults.
func ExampleSettings_RegisterFlags() {
	env := map[string]string{"HOME": "/home/ann", "RAP_LISTEN": "127.0.0.1:9000", "RAP_MODEL": "anthropic:claude-sonnet-4-5"}
	s, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		fmt.Println(err)
		return
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	s.RegisterFlags(fs)
	fs.Parse([]string{"--model", "scripted:demo.json"})
	public, _ := s.PublicURLFor("127.0.0.1:9000")
	fmt.Println(s.Listen, s.Model, s.DataDir, public)
	// Output:
	// 127.0.0.1:9000 scripted:demo.json /home/ann/.local/share/rap http://127.0.0.1:9000
}
