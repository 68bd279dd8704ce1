// A client of the official TypeScript MCP SDK that drives "rap mcp serve"
// through every mapping gorap's end-to-end test checks
// (cmd/rap/mcp_serve_scenario_test.go), against the test's RAP tools:
//
//   1. list the tools;
//   2. call "shout" synchronously;
//   3. call "simmer" as an MCP task (its result arrives about 5 s later)
//      and follow it with the SDK's task API (callToolStream);
//   4. start "hang" as a task and cancel it (tasks/cancel);
//   5. call "pick", which asks the user to choose, and answer "green"
//      through the client's elicitation handler;
//   6. call "ticks", subscribe to the resource it returns, call
//      "release_ticks" to let the events flow, and wait for the
//      resource update notifications, then read the resource.
//
// It prints one JSON object with what it saw on standard output.
//
// Usage: node rap-mcp-scenario.mjs COMMAND [ARGS...]   (stdio)
//        node rap-mcp-scenario.mjs URL [TOKEN]          (Streamable HTTP)

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [target, ...rest] = process.argv.slice(2);
if (!target) {
  console.error("usage: node rap-mcp-scenario.mjs COMMAND [ARGS...] | URL [TOKEN]");
  process.exit(2);
}

let transport;
if (/^https?:\/\//.test(target)) {
  const headers = rest[0] ? { Authorization: `Bearer ${rest[0]}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  transport = new StdioClientTransport({ command: target, args: rest, stderr: "inherit" });
}

const client = new Client(
  { name: "rap-mcp-scenario", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
const elicitations = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  elicitations.push({ message: req.params.message, schema: req.params.requestedSchema });
  return { action: "accept", content: { choice: "green" } };
});
const updates = [];
let updateWaiter = null;
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  updates.push(n.params.uri);
  updateWaiter?.();
});

// within fails when p takes longer than ms.
const within = (p, ms, what) => {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`gave up after ${ms} ms waiting for ${what}`)), ms); });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
};

let protocolVersion = null;
const setVersion = transport.setProtocolVersion?.bind(transport);
transport.setProtocolVersion = (v) => { protocolVersion = v; setVersion?.(v); }; // the client tells the transport what it negotiated
const t0 = Date.now();
const mark = (what) => { if (process.env.SCENARIO_TRACE) console.error(`${Date.now() - t0} ms: ${what}`); };
await client.connect(transport);
const out = { protocolVersion };
out.serverTasks = client.getServerCapabilities()?.tasks ?? null;

mark('// 1. tools');
// 1. tools
const listed = await client.listTools();
out.tools = listed.tools.map((t) => ({ name: t.name, taskSupport: t.execution?.taskSupport ?? null }));

mark('// 2. a synchronous call');
// 2. a synchronous call
out.shout = await client.callTool({ name: "shout", arguments: { text: "hello" } });

mark('// 3. a call that runs');
// 3. a call that runs as a task; its result comes about 5 s later
const started = Date.now();
const stream = client.experimental.tasks.callToolStream({ name: "simmer", arguments: {} }, CallToolResultSchema, {
  task: { ttl: 60000 },
  timeout: 30000,
});
out.simmer = { created: null, statuses: [], result: null, error: null };
for await (const msg of stream) {
  switch (msg.type) {
    case "taskCreated":
      out.simmer.created = msg.task;
      break;
    case "taskStatus":
      out.simmer.statuses.push({ status: msg.task.status, statusMessage: msg.task.statusMessage ?? null });
      break;
    case "result":
      out.simmer.result = msg.result;
      break;
    case "error":
      out.simmer.error = String(msg.error);
      break;
  }
}
out.simmer.elapsedMs = Date.now() - started;
out.simmer.listed = (await client.experimental.tasks.listTasks()).tasks.map((t) => ({ taskId: t.taskId, status: t.status }));

mark('// 4. a task cancelled');
// 4. a task cancelled while it runs
const hang = await client.request(
  { method: "tools/call", params: { name: "hang", arguments: {} } },
  CreateTaskResultSchema,
  { task: { ttl: 60000 } },
);
const cancelled = await client.experimental.tasks.cancelTask(hang.task.taskId);
const after = await client.experimental.tasks.getTask(hang.task.taskId);
out.hang = { created: hang.task.status, cancelAnswer: cancelled.status, after: after.status };

mark('// 5. a user choice');
// 5. a user choice answered through elicitation
out.pick = await client.callTool({ name: "pick", arguments: {} }, undefined, { timeout: 30000 });
out.elicitations = elicitations;

mark('// 6. a subscription');
// 6. a subscription's events as resource updates
const ticks = await client.callTool({ name: "ticks", arguments: { count: 3 } });
const link = ticks.content.find((c) => c.type === "resource_link");
out.ticks = { uri: link?.uri ?? null, updates: 0, events: null };
if (link) {
  await client.subscribeResource({ uri: link.uri });
  const enough = new Promise((resolve) => {
    updateWaiter = () => {
      if (updates.filter((u) => u === link.uri).length >= 4) resolve();
    };
  });
  await client.callTool({ name: "release_ticks", arguments: {} });
  await within(enough, 20000, "4 resource updates");
  out.ticks.updates = updates.filter((u) => u === link.uri).length;
  const read = await client.readResource({ uri: link.uri });
  out.ticks.events = JSON.parse(read.contents[0].text);
}

mark('await client.close();');
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
