// A client of the official TypeScript MCP SDK for gorap's end-to-end test
// of "rap mcp serve" (cmd/rap/mcp_serve_test.go). It starts the server
// command over stdio, lists its tools, makes the calls it is given with a
// progress callback, and prints one JSON object on standard output:
//
//   {"protocolVersion": "...", "tools": [{name, title, description, inputSchema, annotations}],
//    "calls": [{"name": "...", "result": {...}, "progress": [{progress, total, message}]}]}
//
// Usage: node rap-mcp-client.mjs CALLS_JSON COMMAND [ARGS...]
// where CALLS_JSON is [{"name": "...", "arguments": {...}}, ...].

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [callsJSON, command, ...args] = process.argv.slice(2);
if (!command) {
  console.error("usage: node rap-mcp-client.mjs CALLS_JSON COMMAND [ARGS...]");
  process.exit(2);
}
const calls = JSON.parse(callsJSON);

const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
let protocolVersion = null;
transport.setProtocolVersion = (v) => { protocolVersion = v; }; // the client tells the transport what it negotiated
const client = new Client({ name: "rap-mcp-client", version: "1.0.0" }, { capabilities: {} });
await client.connect(transport);

const out = { protocolVersion, tools: [], calls: [] };
const listed = await client.listTools();
out.tools = listed.tools.map(({ name, title, description, inputSchema, annotations }) => ({ name, title, description, inputSchema, annotations }));
for (const call of calls) {
  const progress = [];
  const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} }, undefined, {
    timeout: 20000,
    onprogress: (p) => progress.push({ progress: p.progress, total: p.total, message: p.message }),
  });
  out.calls.push({ name: call.name, result, progress });
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
