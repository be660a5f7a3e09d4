// @ag-ui/client's HttpAgent against the running daemon: every run goes through the client's
// own event verification (verifyEvents) and applies the events to the agent's messages.
import { test } from "node:test";
import assert from "node:assert/strict";
import { HttpAgent, EventType } from "@ag-ui/client";
import { base, alice, bob, restart, unique } from "./helpers.mjs";

const url = base + "/ag-ui/run";

function agent(thread, headers = alice) {
  return new HttpAgent({ url, headers, threadId: unique(thread) });
}

// run runs the agent once and returns what its subscriber saw.
async function run(a, params = {}) {
  const events = [];
  let finished, errored;
  const result = await a.runAgent(params, {
    onEvent: ({ event }) => { events.push(event); },
    onRunFinishedEvent: (e) => { finished = e; },
    onRunErrorEvent: ({ event }) => { errored = event; },
  });
  return { events, finished, errored, result, types: events.map((e) => e.type) };
}

function say(a, text) {
  a.addMessage({ id: unique("m"), role: "user", content: text });
}

test("a text turn", async () => {
  const a = agent("t-text");
  say(a, "hello");
  const r = await run(a);
  assert.equal(r.types[0], EventType.RUN_STARTED);
  assert.ok(r.types.includes(EventType.REASONING_MESSAGE_CONTENT));
  assert.equal(r.finished.outcome, "success");
  const reply = a.messages.at(-1);
  assert.equal(reply.role, "assistant");
  assert.equal(reply.content, "Hello there.");
  const usage = r.events.at(-1).usage[0];
  assert.equal(usage.totalTokens, 15);
  assert.equal(a.state.hookd.status, "completed");
});

test("a tool turn", async () => {
  const a = agent("t-tool");
  say(a, "list my files");
  const r = await run(a);
  assert.equal(r.finished.outcome, "success");
  const call = a.messages.find((m) => m.role === "assistant" && m.toolCalls?.length).toolCalls[0];
  assert.equal(call.function.name, "workspace_list_files");
  const result = a.messages.find((m) => m.role === "tool");
  assert.equal(result.toolCallId, call.id);
  assert.match(result.content, /workspace/);
  assert.equal(a.messages.at(-1).content, "Listed.");
});

test("a tool a hook denies", async () => {
  const a = agent("t-deny");
  say(a, "read the secret");
  const r = await run(a);
  assert.equal(r.finished.outcome, "success");
  const result = a.messages.find((m) => m.role === "tool");
  assert.match(result.content, /^denied: .*not for you/);
  assert.ok(r.events.some((e) => e.type === EventType.CUSTOM && e.name === "hookd.all_denied"));
});

test("a permission ask, answered through an interrupt", async () => {
  const a = agent("t-ask");
  say(a, "write a note");
  const r1 = await run(a);
  assert.equal(r1.finished.outcome, "interrupt");
  const [it] = r1.finished.interrupts;
  assert.equal(it.reason, "tool_approval");
  assert.deepEqual(a.pendingInterrupts.map((i) => i.id), [it.id]);
  // Another user cannot answer it.
  const intruder = new HttpAgent({ url, headers: bob, threadId: a.threadId });
  say(intruder, "write a note");
  await assert.rejects(run(intruder, { resume: [{ interruptId: it.id, status: "resolved", payload: { approved: true } }] }), /409/);
  const r2 = await run(a, { resume: [{ interruptId: it.id, status: "resolved", payload: { approved: true } }] });
  assert.equal(r2.finished.outcome, "success");
  assert.ok(r2.events.some((e) => e.type === EventType.TOOL_CALL_RESULT && e.toolCallId === it.toolCallId && !e.content.startsWith("denied")));
  assert.equal(a.messages.at(-1).content, "Noted.");
});

test("a client-side tool", async () => {
  const a = agent("t-client");
  const tools = [{ name: "pick_color", description: "the user picks a color", parameters: { type: "object", properties: {} } }];
  say(a, "pick a color");
  const r1 = await run(a, { tools });
  assert.equal(r1.finished.outcome, "success");
  assert.equal(r1.finished.pendingToolCallIds.length, 1);
  const id = r1.finished.pendingToolCallIds[0];
  a.addMessage({ id: unique("tm"), role: "tool", toolCallId: id, content: "blue" });
  const r2 = await run(a, { tools });
  assert.equal(r2.finished.outcome, "success");
  assert.equal(a.messages.at(-1).content, "Blue it is.");
});

test("a client-side tool runs with the arguments the hooks let through", async () => {
  const a = agent("t-client-masked");
  const tools = [{ name: "pay_by_card", description: "the client pays", parameters: { type: "object", properties: { card: { type: "string" } } } }];
  say(a, "pay by card");
  const r = await run(a, { tools });
  assert.equal(r.finished.outcome, "success");
  const [id] = r.finished.pendingToolCallIds;
  const call = a.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.id === id);
  assert.deepEqual(JSON.parse(call.function.arguments), { card: "****1111" });
});

test("an error", async () => {
  const a = agent("t-error");
  say(a, "fatal please");
  const r = await run(a);
  assert.equal(r.errored?.type, EventType.RUN_ERROR);
  assert.equal(r.errored.code, "LLM_ERROR");
});

test("a resume after a daemon restart", async () => {
  const a = agent("t-restart");
  say(a, "slow work");
  let restarted;
  const r1 = await a.runAgent({}, {
    onStepStartedEvent: () => { restarted ??= restart(); },
  }).then(() => a);
  await restarted;
  const [it] = r1.pendingInterrupts;
  assert.equal(it.reason, "hookd_suspended");
  assert.equal(it.metadata.suspendReason, "SHUTDOWN_INTERRUPT");
  const r2 = await run(a, { resume: [{ interruptId: it.id, status: "resolved" }] });
  assert.equal(r2.finished.outcome, "success");
  assert.equal(a.messages.at(-1).content, "Done after the restart.");
});

test("no key, no run", async () => {
  const a = agent("t-nokey", {});
  say(a, "hello");
  await assert.rejects(run(a), /401/);
});
