// Drives a Streamable HTTP MCP server with the TypeScript SDK v2 client (@modelcontextprotocol/client).
// Usage: node ts_http_driver.mjs <legacy|auto|pin> <url> <bearer token> <note uri> <workspace uri>
// Reads the note, then deletes by title "groceries", confirming "groceries.md" in the form.
// Prints one JSON object per line (events), then {"done": true}; the Python test asserts on them.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [modeArg, url, token, noteUri, workspaceUri] = process.argv.slice(2);
const mode = modeArg === 'pin' ? { pin: '2026-07-28' } : modeArg;
const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');

const client = new Client(
  { name: 'fsnotes-ts-http-peer', version: '0.1.0' },
  {
    capabilities: { elicitation: { form: {} } },
    versionNegotiation: { mode },
    inputRequired: { maxRounds: 5 },
  },
);
client.setRequestHandler('elicitation/create', async (req) => {
  emit({ elicit: { mode: req.params.mode ?? 'form', message: req.params.message } });
  return { action: 'accept', content: { note_id: 'groceries.md', confirm: true } };
});

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
emit({ era: client.getProtocolEra(), version: client.getNegotiatedProtocolVersion() });
const { tools } = await client.listTools();
emit({ tools: tools.map((t) => t.name) });
for (const [name, a] of [['notes_read', { uri: noteUri }], ['notes_delete', { workspaceUri, title: 'groceries' }]]) {
  try {
    const r = await client.callTool({ name, arguments: a });
    emit({ call: name, isError: r.isError ?? false, structured: r.structuredContent ?? null });
  } catch (e) {
    emit({ call: name, threw: String(e.message).slice(0, 300) });
  }
}
await client.close();
emit({ done: true });
