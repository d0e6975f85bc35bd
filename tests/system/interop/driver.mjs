// A real TypeScript MCP client, driven one command at a time by tests/system/interop/test_interop.py.
//
//   node driver.mjs sdk1 URL      @modelcontextprotocol/sdk 1.x: the 2025-11-25 wire, elicitation/create pushed over SSE
//   node driver.mjs sdk1url URL   sdk1 declaring url elicitation too: a url-mode write's link pushed to it, accepted
//   node driver.mjs client2 URL   @modelcontextprotocol/client 2.x pinned to 2026-07-28: InputRequiredResult rounds
//   node driver.mjs tasks2 URL    client2 with an @modelcontextprotocol/ext-tasks session over it: the tasks extension
//                                 (io.modelcontextprotocol/tasks) declared on its calls, tasks/get polled for it
//   node driver.mjs tasks2ta URL  tasks2 declaring the tool-approval extension (io.modelcontextprotocol/tool-approval,
//                                 a draft) beside the tasks extension on its calls
//
// Protocol: one JSON command per line on stdin, one JSON answer per line on stdout (nothing else is written to
// stdout). Commands: {"op": "info"} | {"op": "listTools"} | {"op": "close"}
// | {"op": "call", "name", "arguments", "answer": "accept" | "decline" | "cancel"}.
// tasks2 adds, through its ext-tasks session: {"op": "taskCall", "name", "arguments"} (a task's id, or an immediate
// result), {"op": "taskInput", "taskId"} (waits for the input the task asked for: its url elicitation, which this
// client accepts without opening it: the test's browser does), {"op": "taskSettle", "taskId"} (waits for the
// outcome; every status seen on the way) and {"op": "taskCancel", "taskId"}.
// Every answer carries "prompts" (the elicitation messages this client was shown while serving the command) and
// "wire" (a summary of every HTTP request the client sent since the previous answer: while serving the command, and
// before it, such as a task's polls while the test's browser was on the approval page; with the JSON-RPC answer to
// each tools/call and tasks/* request as the server sent it, "_meta" included), so the test can tell how the user
// was asked.
import { createInterface } from 'node:readline';

const [kind, url] = process.argv.slice(2);
if (!['sdk1', 'sdk1url', 'client2', 'tasks2', 'tasks2ta'].includes(kind) || !url) {
  process.stderr.write('usage: node driver.mjs sdk1|sdk1url|client2|tasks2|tasks2ta URL\n');
  process.exit(2);
}

let answer = 'accept';
let prompts = [];
let wire = [];
let reading = []; // answers of the current command still being read from the wire

function summarise(message) {
  if (message.method) {
    const params = message.params ?? {};
    return {
      kind: message.id === undefined ? 'notification' : 'request',
      method: message.method,
      ...(params.name ? { name: params.name } : {}),
      ...(params.taskId ? { taskId: params.taskId } : {}),
      ...(params._meta?.['io.modelcontextprotocol/clientCapabilities']?.extensions
        ? { extensions: Object.keys(params._meta['io.modelcontextprotocol/clientCapabilities'].extensions) }
        : {}),
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
    mcpMethod: headers.get('mcp-method'),
    mcpName: headers.get('mcp-name'),
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
  const method = entry.messages[0]?.method ?? '';
  if (method === 'tools/call' || method.startsWith('tasks/')) reading.push(readAnswer(response.clone(), entry));
  return response;
}

// The JSON-RPC answer of a request, as sent (a JSON body, or the last answer of an SSE stream).
async function readAnswer(response, entry) {
  const text = await response.text();
  const bodies = (response.headers.get('content-type') ?? '').includes('text/event-stream')
    ? text.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trim())
    : [text];
  for (const body of bodies.reverse()) {
    try {
      const message = JSON.parse(body);
      if (message.id !== undefined && (message.result !== undefined || message.error !== undefined)) {
        entry.answer = message.result ?? { error: message.error };
        return;
      }
    } catch {
      // not JSON: an SSE comment or a partial line
    }
  }
}

function onElicit(params) {
  if (params.mode === 'url') {
    // The user agrees to open the link; the test's browser is the person who decides there.
    prompts.push({ message: params.message, mode: 'url', url: params.url, elicitationId: params.elicitationId });
    return { action: answer === 'accept' ? 'accept' : answer };
  }
  prompts.push({ message: params.message, requestedSchema: params.requestedSchema });
  if (answer === 'accept') {
    return { action: 'accept', content: { confirm: true } };
  }
  return { action: answer };
}

async function connectSdk1(elicitation = { form: {} }) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const { ElicitRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const client = new Client({ name: 'interop-sdk1', version: '1.0.0' }, { capabilities: { elicitation } });
  client.setRequestHandler(ElicitRequestSchema, async (request) => onElicit(request.params));
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
  await client.connect(transport);
  return {
    client,
    protocolVersion: () => transport.protocolVersion,
    sessionId: () => transport.sessionId ?? null,
  };
}

async function connectClient2(name = 'interop-client2', capabilities = { elicitation: { form: {} } }) {
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const client = new Client(
    { name, version: '1.0.0' },
    { capabilities, versionNegotiation: { mode: { pin: '2026-07-28' } } },
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

// --- tasks2: an ext-tasks session over client2 ----------------------------------------------------------------

const tasks = new Map(); // taskId -> { execution, statuses, settled }
const inputs = []; // every input request a task asked this client for, in order
const inputWaiters = new Map(); // taskId -> resolve, for taskInput

// The host's own request coordinator that ext-tasks needs for 2026-07-28 task traffic (the SDK Client's codecs
// know no tasks/* methods and no resultType "task"): a second transport of the same SDK, whose requests this
// coordinator numbers and matches to their responses. The SDK transport sets the 2026 headers from the framed
// body (MCP-Protocol-Version, Mcp-Method, and Mcp-Name = params.name or params.taskId).
async function rawCoordinator() {
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
  const pending = new Map();
  let next = 0;
  transport.onmessage = (message) => {
    const settle = pending.get(message.id);
    if (settle === undefined) return; // a notification: nothing here waits for one
    pending.delete(message.id);
    settle(message.error ? { kind: 'error', error: message.error } : { kind: 'result', result: message.result });
  };
  await transport.start();
  const dispatch = (request, options = {}) =>
    new Promise((resolve, reject) => {
      next += 1;
      const id = `raw-${next}`;
      pending.set(id, resolve);
      options.signal?.addEventListener('abort', () => {
        pending.delete(id);
        reject(options.signal.reason);
      });
      transport.send({ jsonrpc: '2.0', id, ...request }).catch((err) => {
        pending.delete(id);
        reject(err);
      });
    });
  return { dispatch, close: () => transport.close() };
}

async function connectTasks2(toolApproval = false) {
  const { createTaskSessionFromClient } = await import('@modelcontextprotocol/ext-tasks/client');
  const name = toolApproval ? 'interop-tasks2ta' : 'interop-tasks2';
  const capabilities = { elicitation: { form: {}, url: {} } };
  const session = await connectClient2(name, capabilities);
  const raw = await rawCoordinator();
  // ext-tasks adds the tasks extension to what the framing declares; tasks2ta declares tool-approval beside it.
  const declared = toolApproval
    ? { ...capabilities, extensions: { 'io.modelcontextprotocol/tool-approval': {} } }
    : capabilities;
  const tasksSession = createTaskSessionFromClient(session.client, {
    endpointId: url,
    rawDispatch: raw.dispatch,
    v2RequestFraming: {
      protocolVersion: session.client.getNegotiatedProtocolVersion(),
      clientInfo: { name, version: '1.0.0' },
      clientCapabilities: declared,
    },
    onInputRequest: async (request, context) => {
      inputs.push({ kind: request.kind, params: request.params, taskId: context.taskId, inputId: context.inputId });
      inputWaiters.get(context.taskId)?.();
      return { action: 'accept' }; // a url elicitation: the user agrees to open the link (the test's browser does)
    },
  });
  return {
    ...session,
    tasksSession,
    close: async () => {
      await tasksSession.close();
      await raw.close();
    },
  };
}

function outcomeOf(outcome) {
  if (outcome.status === 'completed') return { status: 'completed', result: outcome.result };
  if (outcome.status === 'failed') {
    return { status: 'failed', error: { code: outcome.error.code ?? null, message: outcome.error.message } };
  }
  return { status: outcome.status };
}

async function taskCall(session, command) {
  const execution = await session.tasksSession.callTool(command.name, command.arguments ?? {});
  if (execution.kind !== 'task') {
    const { outcome } = await execution.settle();
    return { kind: 'immediate', outcome: outcomeOf(outcome) };
  }
  const { taskId } = execution.handle;
  const statuses = [];
  const settled = execution.settle({
    onEvent: (event) => {
      if (event.type === 'task') statuses.push(event.task.status);
    },
  });
  tasks.set(taskId, { execution, statuses, settled });
  return { kind: 'task', taskId };
}

async function taskInput(command) {
  const asked = () => inputs.filter((input) => input.taskId === command.taskId);
  if (asked().length === 0) await new Promise((resolve) => inputWaiters.set(command.taskId, resolve));
  inputWaiters.delete(command.taskId);
  return { inputs: asked() };
}

async function taskSettle(command) {
  const task = tasks.get(command.taskId);
  const { outcome, lastTask } = await task.settled;
  const last = lastTask ? { status: lastTask.status, ttlMs: lastTask.retentionMs, pollIntervalMs: lastTask.suggestedPollIntervalMs } : null;
  return { outcome: outcomeOf(outcome), statuses: task.statuses, lastTask: last };
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
    case 'taskCall':
      return await taskCall(session, command);
    case 'taskInput':
      return await taskInput(command);
    case 'taskSettle':
      return await taskSettle(command);
    case 'taskCancel':
      await tasks.get(command.taskId).execution.cancel();
      return { cancelled: true };
    case 'close':
      await session.close?.();
      await client.close();
      return { closed: true };
    default:
      throw new Error(`unknown op ${command.op}`);
  }
}

const connect = {
  sdk1: () => connectSdk1(),
  sdk1url: () => connectSdk1({ form: {}, url: {} }),
  client2: () => connectClient2(),
  tasks2: () => connectTasks2(),
  tasks2ta: () => connectTasks2(true),
};
const session = await connect[kind]();
process.stdout.write(`${JSON.stringify({ ready: true, kind, connectWire: wire })}\n`);
wire = [];

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  prompts = [];
  let reply;
  try {
    reply = await run(session, command);
  } catch (err) {
    reply = describeError(err);
  }
  await Promise.allSettled(reading);
  process.stdout.write(`${JSON.stringify({ op: command.op, ...reply, prompts, wire })}\n`);
  wire = [];
  reading = [];
  if (command.op === 'close') break;
}
process.exit(0);
