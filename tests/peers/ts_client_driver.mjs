// Drives a stdio MCP server with the TypeScript SDK v2 client (@modelcontextprotocol/client).
// Usage: node ts_client_driver.mjs <legacy|auto|pin> <server-cmd> [args...]
// Prints one JSON object per line (events), then {"done": true}; the Python test asserts on them.
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const [modeArg, cmd, ...args] = process.argv.slice(2);
const mode = modeArg === 'pin' ? { pin: '2026-07-28' } : modeArg;
const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const client = new Client(
  { name: 'fsnotes-ts-peer', version: '0.1.0' },
  {
    capabilities: { elicitation: { form: {}, url: {} }, roots: { listChanged: true } },
    versionNegotiation: { mode },
    inputRequired: { maxRounds: 5 },
  },
);
client.setRequestHandler('elicitation/create', async (req) => {
  const p = req.params;
  emit({ elicit: { mode: p.mode ?? 'form', message: p.message, elicitationId: p.elicitationId ?? null } });
  if (p.mode === 'url') return { action: 'accept' };
  return { action: 'accept', content: { ok: true } };
});
client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: 'file:///home/ts/notes', name: 'notes' }] }));

await client.connect(new StdioClientTransport({ command: cmd, args, stderr: 'ignore' }));
emit({ era: client.getProtocolEra(), version: client.getNegotiatedProtocolVersion(), server: client.getServerVersion() });
const { tools } = await client.listTools();
emit({ tools: tools.map((t) => t.name) });
for (const [name, a] of [['echo', { text: 'ts' }], ['confirm', { title: 'ts-note' }], ['visit', {}], ['add', { a: 1, b: 2 }], ['add', { a: 'x', b: 2 }]]) {
  try {
    const r = await client.callTool({ name, arguments: a });
    emit({ call: name, isError: r.isError ?? false, structured: r.structuredContent ?? null, text: r.content?.map((c) => c.text).join(' ') });
  } catch (e) {
    emit({ call: name, threw: String(e.message).slice(0, 300) });
  }
}
await client.close();
emit({ done: true });
