// What the client tests share: where the daemon is, its keys, and its restart.
export const base = process.env.HOOKD_URL;
export const control = process.env.HOOKD_CONTROL;
export const alice = { Authorization: "Bearer key-alice" };
export const bob = { Authorization: "Bearer key-bob" };

if (!base || !control) {
  throw new Error("HOOKD_URL and HOOKD_CONTROL are set by the Go test that starts the daemon (go test ./test/clients)");
}

// restart stops the daemon gracefully (its runs pause: SHUTDOWN_INTERRUPT) and starts it again
// on the same database and address; it returns once the new one listens.
export async function restart() {
  const r = await fetch(control + "/restart", { method: "POST" });
  if (!r.ok) throw new Error(`restart: ${r.status} ${await r.text()}`);
}

// crash SIGKILLs the daemon mid-work and starts it again: its runs are recovered paused.
export async function crash() {
  const r = await fetch(control + "/crash", { method: "POST" });
  if (!r.ok) throw new Error(`crash: ${r.status} ${await r.text()}`);
}

// unique makes ids unique per test run, so reruns against one database do not meet.
export const unique = (s) => `${s}-${process.pid}-${Date.now()}`;
