// A real TypeScript MCP client, driven one command at a time by tests/system/interop/test_interop.py.
//
//   node driver.mjs sdk1 URL      @modelcontextprotocol/sdk 1.x: the 2025-11-25 wire, elicitation/create pushed over SSE
//   node driver.mjs client2 URL   @modelcontextprotocol/client 2.x pinned to 2026-07-28: InputRequiredResult rounds
//
// Protocol: one JSON command per line on stdin, one JSON answer per line on stdout (nothing else is written to
// stdout). Commands: {"op": "info"} | {"op": "listTools"} | {"op": "close"}
// | {"op": "call", "name", "arguments", "answer": "accept" | "decline" | "cancel"}.
// Every answer carries "prompts" (the elicitation messages this client was shown while serving the command) and
// "wire" (a summary of every HTTP request the client sent meanwhile), so the test can tell how the user was asked.
import { createInterface } from 'node:readline';

const [kind, url] = process.argv.slice(2);
if (!['sdk1', 'client2'].includes(kind) || !url) {
  process.stderr.write('usage: node driver.mjs sdk1|client2 URL\n');
  process.exit(2);
}

let answer = 'accept';
let prompts = [];
let wire = [];

function summarise(message) {
  if (message.method) {
    const params = message.params ?? {};
    return {
      kind: message.id === undefined ? 'notification' : 'request',
      method: message.method,
      ...(params.name ? { name: params.name } : {}),
      ...(params.inputResponses ? { inputResponses: Object.keys(params.inputResponses) } : {}),
      ...(params.requestState ? { requestState: true } : {}),
    };
  }
  return { kind: message.error ? 'error-response' : 'response', ...(message.result?.action ? { action: message.result.action } : {}) };
}

// Records what this client puts on the wire; the response is passed through untouched.
async function recordingFetch(input, init = {}) {
  const headers = new Headers(init.headers ?? {});
  const entry = {
    http: init.method ?? 'GET',
    protocolVersion: headers.get('mcp-protocol-version'),
    session: headers.has('mcp-session-id'),
    messages: [],
  };
  if (typeof init.body === 'string') {
    const body = JSON.parse(init.body);
    entry.messages = (Array.isArray(body) ? body : [body]).map(summarise);
  }
  wire.push(entry); // in the order sent; the status is filled in when the answer's headers arrive
  const response = await fetch(input, init);
  entry.status = response.status;
  return response;
}

function onElicit(params) {
  prompts.push({ message: params.message, requestedSchema: params.requestedSchema });
  if (answer === 'accept') {
    return { action: 'accept', content: { confirm: true } };
  }
  return { action: answer };
}

async function connectSdk1() {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const { ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const client = new Client({ name: 'interop-sdk1', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async (request) => onElicit(request.params));
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
  await client.connect(transport);
  return {
    client,
    protocolVersion: () => transport.protocolVersion,
    sessionId: () => transport.sessionId ?? null,
  };
}

async function connectClient2() {
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const client = new Client(
    { name: 'interop-client2', version: '1.0.0' },
    {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: { pin: '2026-07-28' } },
    },
  );
  client.setRequestHandler('elicitation/create', async (request) => onElicit(request.params));
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
  await client.connect(transport);
  return {
    client,
    protocolVersion: () => client.getNegotiatedProtocolVersion(),
    sessionId: () => transport.sessionId ?? null,
  };
}

function describeError(err) {
  // A JSON-RPC error from the server (McpError in 1.x, ProtocolError in 2.x) keeps its numeric code.
  return { error: { code: typeof err?.code === 'number' ? err.code : null, message: String(err?.message ?? err), type: err?.constructor?.name } };
}

async function run(session, command) {
  const { client } = session;
  switch (command.op) {
    case 'info':
      return {
        protocolVersion: session.protocolVersion(),
        sessionId: session.sessionId(),
        serverVersion: client.getServerVersion() ?? null,
        serverCapabilities: client.getServerCapabilities() ?? null,
      };
    case 'listTools':
      return { result: await client.listTools() };
    case 'call':
      answer = command.answer ?? 'accept';
      return { result: await client.callTool({ name: command.name, arguments: command.arguments ?? {} }) };
    case 'close':
      await client.close();
      return { closed: true };
    default:
      throw new Error(`unknown op ${command.op}`);
  }
}

const session = await (kind === 'sdk1' ? connectSdk1() : connectClient2());
process.stdout.write(`${JSON.stringify({ ready: true, kind, connectWire: wire })}\n`);
wire = [];

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  prompts = [];
  wire = [];
  let reply;
  try {
    reply = await run(session, command);
  } catch (err) {
    reply = describeError(err);
  }
  process.stdout.write(`${JSON.stringify({ op: command.op, ...reply, prompts, wire })}\n`);
  if (command.op === 'close') break;
}
process.exit(0);
