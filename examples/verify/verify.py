#!/usr/bin/env python3
"""Verify hookd webhook signatures with the Python standard library only.

Copy verify_hookd / verify_standard into your receiver. Pass the raw request
body bytes (Flask: request.get_data(); Django: request.body), never a
re-serialised JSON object.

Run as a script, it checks cases read as JSON from standard input, one object
or a list of them, and prints "ok" or "rejected: <reason>" per case:

  {"secret": "...", "headers": {"X-Webhook-Timestamp": "...", ...},
   "body": "<raw body as text>", "now_ms": 1700000000000}

now_ms is optional (default: the current time). Exit status 1 if any case was
rejected.
"""
import json
import sys

# --- begin verify ---
import base64
import hashlib
import hmac
import time

TOLERANCE_SECONDS = 5 * 60
HASHES = {"sha256": hashlib.sha256, "sha512": hashlib.sha512}


class VerificationError(Exception):
    pass


def _header(headers, name):
    # Header names are case-insensitive.
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return ""


def _is_decimal(s):
    return s.isascii() and s.isdigit() and len(s) <= 18


def verify_hookd(secret, headers, body, now=None, tolerance=TOLERANCE_SECONDS):
    """Raise VerificationError unless body (bytes) carries a valid hookd signature."""
    ts = _header(headers, "x-webhook-timestamp")
    sig = _header(headers, "x-webhook-signature")
    if not _is_decimal(ts):
        raise VerificationError("missing or malformed X-Webhook-Timestamp")
    now = time.time() if now is None else now
    if abs(now * 1000 - int(ts)) > tolerance * 1000:
        raise VerificationError("timestamp outside the allowed window")
    alg, sep, received = sig.partition("=")
    if not sep or alg not in HASHES:  # read the prefix: the algorithm may change
        raise VerificationError("missing, malformed or unknown X-Webhook-Signature")
    expected = hmac.new(secret.encode(), ts.encode() + b"." + body, HASHES[alg]).hexdigest()
    if not hmac.compare_digest(expected.encode(), received.lower().encode()):
        raise VerificationError("signature mismatch")


def verify_standard(secret, headers, body, now=None, tolerance=TOLERANCE_SECONDS):
    """Raise VerificationError unless body (bytes) carries a valid Standard Webhooks signature."""
    msg_id = _header(headers, "webhook-id")
    ts = _header(headers, "webhook-timestamp")
    sigs = _header(headers, "webhook-signature")
    if not msg_id or not sigs or not _is_decimal(ts):
        raise VerificationError("missing or malformed webhook-* headers")
    now = time.time() if now is None else now
    if abs(now - int(ts)) > tolerance:
        raise VerificationError("timestamp outside the allowed window")
    if not secret.startswith("whsec_"):
        raise VerificationError("secret must start with whsec_")
    key = base64.b64decode(secret[len("whsec_"):], validate=True)
    signed = msg_id.encode() + b"." + ts.encode() + b"." + body
    expected = hmac.new(key, signed, hashlib.sha256).digest()
    for entry in sigs.split():  # several signatures while a secret is rotated
        version, _, value = entry.partition(",")
        if version != "v1":
            continue
        try:
            candidate = base64.b64decode(value, validate=True)
        except ValueError:
            continue
        if hmac.compare_digest(candidate, expected):
            return
    raise VerificationError("no valid v1 signature")
# --- end verify ---


def main():
    cases = json.load(sys.stdin)
    if isinstance(cases, dict):
        cases = [cases]
    all_ok = True
    for case in cases:
        headers = case["headers"]
        verify = verify_standard if _header(headers, "webhook-signature") else verify_hookd
        now_ms = case.get("now_ms")
        try:
            verify(case["secret"], headers, case["body"].encode(),
                   now=None if now_ms is None else now_ms / 1000)
            print("ok")
        except VerificationError as e:
            all_ok = False
            print("rejected:", e)
    sys.exit(0 if all_ok else 1)


if __name__ == "__main__":
    main()
