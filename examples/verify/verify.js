#!/usr/bin/env node
// Verify hookd webhook signatures with Node's standard library only.
//
// Copy verifyHookd / verifyStandard into your receiver. Pass the raw request
// body as a Buffer (Express: express.raw({ type: "application/json" })),
// never a re-serialised JSON object.
//
// Run as a script, it checks cases read as JSON from standard input, one
// object or an array of them, and prints "ok" or "rejected: <reason>" per case:
//
//   {"secret": "...", "headers": {"X-Webhook-Timestamp": "...", ...},
//    "body": "<raw body as text>", "now_ms": 1700000000000}
//
// now_ms is optional (default: the current time). Exit status 1 if any case
// was rejected.
"use strict";

// --- begin verify ---
const crypto = require("node:crypto");

const TOLERANCE_MS = 5 * 60 * 1000;
const HASHES = new Set(["sha256", "sha512"]);

function header(headers, name) {
  // Header names are case-insensitive (Node's req.headers are lower-case already).
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return String(value);
  }
  return "";
}

const DECIMAL = /^[0-9]{1,18}$/;

// Throws unless body (a Buffer) carries a valid hookd signature.
function verifyHookd(secret, headers, body, nowMs = Date.now(), toleranceMs = TOLERANCE_MS) {
  const ts = header(headers, "x-webhook-timestamp");
  const sig = header(headers, "x-webhook-signature");
  if (!DECIMAL.test(ts)) throw new Error("missing or malformed X-Webhook-Timestamp");
  if (Math.abs(nowMs - Number(ts)) > toleranceMs) throw new Error("timestamp outside the allowed window");
  const eq = sig.indexOf("=");
  const alg = eq > 0 ? sig.slice(0, eq) : "";
  const hex = sig.slice(eq + 1);
  // Read the prefix: the algorithm may change.
  if (!HASHES.has(alg)) throw new Error("missing, malformed or unknown X-Webhook-Signature");
  const expected = crypto.createHmac(alg, secret).update(ts + ".").update(body).digest();
  // Buffer.from(..., "hex") stops silently at the first bad character: check first.
  if (hex.length !== expected.length * 2 || !/^[0-9a-fA-F]+$/.test(hex)) throw new Error("signature mismatch");
  if (!crypto.timingSafeEqual(Buffer.from(hex, "hex"), expected)) throw new Error("signature mismatch");
}

// Throws unless body (a Buffer) carries a valid Standard Webhooks signature.
function verifyStandard(secret, headers, body, nowMs = Date.now(), toleranceMs = TOLERANCE_MS) {
  const id = header(headers, "webhook-id");
  const ts = header(headers, "webhook-timestamp");
  const sigs = header(headers, "webhook-signature");
  if (!id || !sigs || !DECIMAL.test(ts)) throw new Error("missing or malformed webhook-* headers");
  if (Math.abs(nowMs - Number(ts) * 1000) > toleranceMs) throw new Error("timestamp outside the allowed window");
  if (!secret.startsWith("whsec_")) throw new Error("secret must start with whsec_");
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  const expected = crypto.createHmac("sha256", key).update(`${id}.${ts}.`).update(body).digest();
  for (const entry of sigs.split(/\s+/)) { // several signatures while a secret is rotated
    const comma = entry.indexOf(",");
    if (comma < 0 || entry.slice(0, comma) !== "v1") continue;
    const candidate = Buffer.from(entry.slice(comma + 1), "base64");
    if (candidate.length === expected.length && crypto.timingSafeEqual(candidate, expected)) return;
  }
  throw new Error("no valid v1 signature");
}
// --- end verify ---

module.exports = { verifyHookd, verifyStandard };

if (require.main === module) {
  let input = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (chunk) => (input += chunk));
  process.stdin.on("end", () => {
    const parsed = JSON.parse(input);
    const cases = Array.isArray(parsed) ? parsed : [parsed];
    let allOk = true;
    for (const c of cases) {
      const verify = header(c.headers, "webhook-signature") ? verifyStandard : verifyHookd;
      try {
        verify(c.secret, c.headers, Buffer.from(c.body, "utf8"), c.now_ms ?? Date.now());
        console.log("ok");
      } catch (e) {
        allOk = false;
        console.log("rejected: " + e.message);
      }
    }
    process.exitCode = allOk ? 0 : 1;
  });
}
