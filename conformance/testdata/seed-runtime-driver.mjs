// Drives the seed-shaped Node runtime (its index.mjs in the current directory) for
// `rap conformance runtime --manual`: a fake Anthropic model on 127.0.0.1:7001 that calls the tool a
// step's message names, the runtime itself on 127.0.0.1:3000 (restarted when it exits), and the
// instructions the kit prints, read from standard input and sent to the runtime's /message. See
// docs/conformance.md ("Runtimes" under the results) for how it was run.
import http from 'node:http';
import { spawn } from 'node:child_process';
import readline from 'node:readline';

let n = 0;
http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const { messages } = JSON.parse(body);
    const last = messages[messages.length - 1];
    const text = typeof last.content === 'string' ? last.content : '';
    const step = /\[step:([a-z-]+)\]/.exec(text), tool = /Call the tool (\S+)/.exec(text);
    const content = step && tool
      ? [{ type: 'tool_use', id: 'toolu_' + ++n, name: tool[1], input: { step: step[1] } }]
      : [{ type: 'text', text: 'ok' }];
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ id: 'msg_' + ++n, type: 'message', role: 'assistant', model: 'fake', content,
      stop_reason: step ? 'tool_use' : 'end_turn', stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } }));
  });
}).listen(7001, '127.0.0.1');

let child;
process.on('exit', () => child && child.kill());
function runtime() {
  const p = child = spawn('node', ['index.mjs'], { stdio: ['ignore', 'inherit', 'pipe'], env: { ...process.env,
    ANTHROPIC_BASE_URL: 'http://127.0.0.1:7001', ANTHROPIC_API_KEY: 'x', PORT: '3000', TOOL_SERVERS: 'http://127.0.0.1:7070' } });
  p.stderr.on('data', (d) => process.stderr.write('[seed runtime] ' + String(d).split('\n').filter((l) => /Error/.test(l)).join(' | ').slice(0, 300) + '\n'));
  p.on('exit', (code) => { if (code === null) return; console.error(`[driver] the seed runtime exited (${code}); restarting it`); setTimeout(runtime, 200); });
}
runtime();

let thread = 0;
const send = (text) => fetch('http://127.0.0.1:3000/message', { method: 'POST', headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify({ thread_id: 't' + thread, text }) }).catch((e) => console.error('[driver] /message:', e.message));
// Wait until the runtime answers before passing on the kit's instructions.
for (;;) {
  try { await fetch('http://127.0.0.1:3000/'); break; } catch { await new Promise((r) => setTimeout(r, 100)); }
}
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  console.log(line);
  let m;
  if ((m = /^>>> \d+\. In a NEW conversation, send the agent: (.*)$/.exec(line))) { thread++; send(m[1]); }
  else if ((m = /^>>> \d+\. In the same conversation, send the agent: (.*)$/.exec(line))) send(m[1]);
  else if (line.startsWith('>>> ')) console.error('[driver] the seed runtime has no way to do this; skipped');
}).on('close', () => process.exit(0));
