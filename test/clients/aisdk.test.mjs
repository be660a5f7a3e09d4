// The AI SDK's own chat client (AbstractChat, what useChat runs on) with its DefaultChatTransport
// against the running daemon: the transport parses the UI message stream against the protocol's
// chunk schema, and the chat applies it to its messages.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
  readUIMessageStream,
} from "ai";
import { base, alice, bob, crash, restart, unique } from "./helpers.mjs";

const api = base + "/ai-sdk/chat";

// Chat is AbstractChat with its state in plain arrays, as a framework binding would keep it.
class Chat extends AbstractChat {
  constructor(options) {
    const state = {
      status: "ready",
      error: undefined,
      messages: [],
      pushMessage(m) { this.messages = this.messages.concat(m); },
      popMessage() { this.messages = this.messages.slice(0, -1); },
      replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; },
      snapshot: (x) => structuredClone(x),
    };
    super({ ...options, state });
  }
}

function newChat(id, { headers = alice, body, ...options } = {}) {
  const chunks = [];
  const waiting = [];
  const seen = (c) => {
    chunks.push(c);
    for (const w of waiting.splice(0)) if (w.pred(c)) w.resolve(c); else waiting.push(w);
  };
  const transport = new DefaultChatTransport({ api, headers, body });
  const send = transport.sendMessages.bind(transport);
  transport.sendMessages = async (o) => tee(await send(o), seen);
  const reconnect = transport.reconnectToStream.bind(transport);
  transport.reconnectToStream = async (o) => { const s = await reconnect(o); return s && tee(s, seen); };
  const errors = [];
  const finishing = [];
  const chat = new Chat({ id: unique(id), transport, onError: (e) => errors.push(e),
    onFinish: (f) => { for (const w of finishing.splice(0)) if (--w.n === 0) w.resolve(f); else finishing.push(w); }, ...options });
  // chunk resolves with the first chunk from now on that pred accepts.
  const chunk = (pred) => new Promise((resolve) => waiting.push({ pred, resolve }));
  // finished resolves when the next n responses have finished streaming.
  const finished = (n = 1) => new Promise((resolve) => finishing.push({ n, resolve }));
  return { chat, chunks, errors, transport, chunk, finished };
}

// tee hands each chunk a stream carries to seen.
function tee(stream, seen) {
  return stream.pipeThrough(new TransformStream({ transform(c, ctl) { seen(c); ctl.enqueue(c); } }));
}

// dropAt sends words as a new turn of chatId and drops the connection at the first part of
// type typ, as a client whose network goes away; the run goes on.
async function dropAt(transport, chatId, words, typ) {
  const abort = new AbortController();
  const stream = await transport.sendMessages({ chatId, trigger: "submit-message", abortSignal: abort.signal,
    messages: [{ id: unique("m"), role: "user", parts: [{ type: "text", text: words }] }] });
  const reader = stream.getReader();
  for (;;) {
    const { value } = await reader.read();
    if (value.type === typ) break;
  }
  abort.abort();
}

const last = (chat) => chat.messages.at(-1);
const text = (m) => m.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
const toolParts = (m) => m.parts.filter((p) => p.type === "dynamic-tool" || p.type.startsWith("tool-"));

test("a text turn", async () => {
  const { chat, chunks } = newChat("c-text");
  await chat.sendMessage({ text: "hello" });
  assert.equal(chat.status, "ready");
  const m = last(chat);
  assert.equal(m.role, "assistant");
  assert.equal(text(m), "Hello there.");
  assert.ok(m.parts.some((p) => p.type === "reasoning" && p.text.length > 0));
  assert.equal(m.metadata.usage.totalTokens, 15);
  assert.equal(m.metadata.usage.reasoningTokens, 2);
  assert.equal(chunks.at(-1).type, "finish");
  assert.equal(chunks.at(-1).finishReason, "stop");
});

test("a tool turn", async () => {
  const { chat } = newChat("c-tool");
  await chat.sendMessage({ text: "list my files" });
  const [call] = toolParts(last(chat));
  assert.equal(call.type, "dynamic-tool");
  assert.equal(call.toolName, "workspace_list_files");
  assert.equal(call.state, "output-available");
  assert.match(call.output, /workspace/);
  assert.equal(text(last(chat)), "Listed.");
});

test("a tool a hook denies", async () => {
  const { chat } = newChat("c-deny");
  await chat.sendMessage({ text: "read the secret" });
  const [call] = toolParts(last(chat));
  assert.equal(call.state, "output-error");
  assert.match(call.errorText, /^denied: .*not for you/);
});

test("a permission ask, answered as a tool approval", async () => {
  const { chat, chunks, finished } = newChat("c-ask", { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
  await chat.sendMessage({ text: "write a note" });
  const [call] = toolParts(last(chat));
  assert.equal(call.state, "approval-requested");
  assert.equal(chunks.at(-1).finishReason, "tool-calls");
  // Another user's approval of it is refused.
  const intruder = newChat("x", { headers: bob });
  const stolen = structuredClone(chat.messages);
  stolen.at(-1).parts = stolen.at(-1).parts.map((p) => p.toolCallId === call.toolCallId
    ? { ...p, state: "approval-responded", approval: { id: call.approval.id, approved: true } } : p);
  await assert.rejects(intruder.transport.sendMessages({ chatId: chat.id, messages: stolen, trigger: "submit-message" }), /nothing in chat/);
  const resumed = finished();
  await chat.addToolApprovalResponse({ id: call.approval.id, approved: true });
  await resumed;
  const [after] = toolParts(last(chat));
  assert.equal(after.state, "output-available");
  assert.equal(text(last(chat)), "Noted.");
  assert.equal(chat.messages.filter((m) => m.role === "assistant").length, 1, "the resumed response continues the same message");
});

test("a refused approval", async () => {
  const { chat, finished } = newChat("c-refuse", { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
  await chat.sendMessage({ text: "write a note" });
  const [call] = toolParts(last(chat));
  const resumed = finished();
  await chat.addToolApprovalResponse({ id: call.approval.id, approved: false, reason: "not today" });
  await resumed;
  const [after] = toolParts(last(chat));
  assert.equal(after.state, "output-denied");
});

test("a client-side tool", async () => {
  const tools = [{ name: "pick_color", description: "the user picks a color", inputSchema: { type: "object", properties: {} } }];
  let c;
  const { chat } = c = newChat("c-client", {
    body: { tools },
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: ({ toolCall }) => {
      if (toolCall.toolName === "pick_color") {
        c.chat.addToolOutput({ tool: "pick_color", toolCallId: toolCall.toolCallId, output: "blue" });
      }
    },
  });
  const both = c.finished(2); // the call, then the answer after the tool's output
  await chat.sendMessage({ text: "pick a color" });
  await both;
  const [call] = toolParts(last(chat));
  assert.equal(call.type, "tool-pick_color");
  assert.equal(call.state, "output-available");
  assert.equal(call.output, "blue");
  assert.match(text(last(chat)), /Blue it is\./);
});

test("a client-side tool a hook denies never runs on the client", async () => {
  const tools = [{ name: "pick_forbidden", description: "the user picks a color", inputSchema: { type: "object", properties: {} } }];
  const ran = [];
  const { chat } = newChat("c-client-denied", {
    body: { tools },
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: ({ toolCall }) => { ran.push(toolCall.toolName); },
  });
  await chat.sendMessage({ text: "pick a forbidden color" });
  assert.deepEqual(ran, [], "onToolCall ran a call the hook denied");
  const [call] = toolParts(last(chat));
  assert.equal(call.type, "tool-pick_forbidden");
  assert.equal(call.state, "output-error");
  assert.match(call.errorText, /not that one/);
  assert.match(text(last(chat)), /It was refused\./);
});

test("an error", async () => {
  const { chat, chunks } = newChat("c-error");
  await chat.sendMessage({ text: "fatal please" });
  const err = chunks.find((c) => c.type === "error");
  assert.match(err.errorText, /^LLM_ERROR: /);
  assert.equal(chat.status, "error");
  assert.match(chat.error.message, /^LLM_ERROR: /);
});

test("a resume: the stream is replayed from the event log, then live", async () => {
  const { chat, transport } = newChat("c-resume");
  await dropAt(transport, chat.id, "slow work", "start-step");
  const resumed = await transport.reconnectToStream({ chatId: chat.id });
  assert.ok(resumed, "a stream to resume");
  let message;
  for await (const m of readUIMessageStream({ stream: resumed })) message = m;
  assert.equal(text(message), "Done after the restart.");
  assert.equal(toolParts(message)[0].state, "output-available");
  // Soon after the finish a reconnect replays the same message: the SDK replaces it by its equal.
  let again;
  for await (const m of readUIMessageStream({ stream: await transport.reconnectToStream({ chatId: chat.id }) })) again = m;
  assert.deepEqual(again, message, "the same message again");
});

test("a reconnect during the answer after an approval: the whole message comes back", async () => {
  const { chat, chunk } = newChat("c-ask-drop");
  await chat.sendMessage({ text: "write slowly" });
  const [call] = toolParts(last(chat));
  assert.equal(call.state, "approval-requested");
  await chat.addToolApprovalResponse({ id: call.approval.id, approved: true });
  const ran = chunk((c) => c.type === "tool-output-available");
  const sending = chat.sendMessage();
  await ran;
  await chat.stop(); // the connection drops while the answer is still to come
  await sending;
  await chat.resumeStream();
  assert.equal(chat.status, "ready", String(chat.error));
  const [after] = toolParts(last(chat));
  assert.equal(after.state, "output-available");
  assert.equal(after.approval.approved, true);
  assert.equal(text(last(chat)), "Noted, slowly.");
  assert.equal(chat.messages.filter((m) => m.role === "assistant").length, 1);
});

test("a drop before the approval request: resumeStream brings it", async () => {
  const { chat, transport } = newChat("c-ask-early");
  await dropAt(transport, chat.id, "write a note", "tool-input-start");
  await chat.resumeStream();
  const [call] = toolParts(last(chat));
  assert.equal(call.state, "approval-requested", "the client learns what to approve");
  await chat.addToolApprovalResponse({ id: call.approval.id, approved: true });
  await chat.sendMessage();
  assert.equal(text(last(chat)), "Noted.");
});

test("a resume after a daemon restart", async () => {
  const { chat, chunks, chunk } = newChat("c-restart");
  const stepped = chunk((c) => c.type === "start-step");
  const sent = chat.sendMessage({ text: "slow work" });
  await stepped;
  await restart();
  await sent;
  assert.equal(chunks.at(-1).type, "finish");
  assert.equal(chunks.at(-1).finishReason, "other");
  await chat.resumeStream();
  assert.equal(text(last(chat)), "Done after the restart.");
  assert.equal(chat.messages.filter((m) => m.role === "assistant").length, 1);
});

test("a crash: resumeStream picks the run up", async () => {
  const { chat, chunk } = newChat("c-crash");
  const stepped = chunk((c) => c.type === "start-step");
  const sent = chat.sendMessage({ text: "slow work" });
  await stepped;
  await crash();
  await sent;
  assert.equal(chat.status, "error", "the stream broke off");
  await chat.resumeStream();
  assert.equal(chat.status, "ready");
  assert.equal(text(last(chat)), "Done after the restart.");
});

test("no key, no chat", async () => {
  const { chat, errors } = newChat("c-nokey", { headers: {} });
  await chat.sendMessage({ text: "hello" });
  assert.equal(chat.status, "error");
  assert.match(String(errors[0] ?? chat.error), /API key/);
});
