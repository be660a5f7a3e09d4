#!/usr/bin/env python3
"""Regenerates hookd.json and standard.json in this directory.

This is a second, independent implementation of both signing schemes using
only the Python standard library (hmac, hashlib, base64). The Go package
github.com/hookd/hookd/signing is tested against its output, so a mistake in
the Go code (delimiter, key handling, encoding) cannot hide behind a test that
only round-trips through itself.

Run from anywhere:  python3 testdata/signing/gen_vectors.py
"""
import base64
import hashlib
import hmac
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

ENVELOPE = (
    '{"schemaVersion":1,"eventId":"01HZX3K8Q2N4V6B8D0F2H4J6K8",'
    '"hookType":"tool.before","hookName":"deny-shell","occurredAt":"2024-01-01T00:00:00.000Z",'
    '"deliveryAttempt":1,"context":{"tool":"shell","input":"rm -rf /tmp/x"}}'
)


def hookd_sig(alg, secret, timestamp, body):
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body.encode(), getattr(hashlib, alg))
    return alg + "=" + digest.hexdigest()


def standard_sig(secret, msg_id, timestamp, body):
    assert secret.startswith("whsec_")
    key = base64.b64decode(secret[len("whsec_"):], validate=True)
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + body.encode()
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def hookd_vectors():
    cases = [
        ("json envelope", "sha256", "hookd-test-secret", "1700000000000", ENVELOPE),
        ("empty body", "sha256", "hookd-test-secret", "1700000000000", ""),
        ("non-ascii body with newline", "sha256", "s3cr3t-\u00e9", "1718236800123",
         '{"note":"caf\u00e9 \u2013 \u65e5\u672c"}\n'),
        ("secret that looks like whsec_ is still used as raw bytes", "sha256",
         "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "1614265330000", '{"test": 2432232314}'),
        ("sha512 (the documented next algorithm)", "sha512", "hookd-test-secret", "1700000000000", ENVELOPE),
    ]
    return [
        {"name": n, "secret": s, "timestamp": ts, "body": b, "signature": hookd_sig(alg, s, ts, b)}
        for n, alg, s, ts, b in cases
    ]


SPEC_VECTOR = {
    "name": "Standard Webhooks specification test vector",
    "source": "https://github.com/standard-webhooks/standard-webhooks, "
    "libraries/go/webhook_test.go TestWebhookSign (same values in the other "
    "reference libraries' tests, e.g. libraries/php/tests/WebhookTest.php)",
    "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "timestamp": "1614265330",
    "body": '{"test": 2432232314}',
    "signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}


def standard_vectors():
    # Check this implementation against the published vector before trusting it for the rest.
    v = SPEC_VECTOR
    assert standard_sig(v["secret"], v["id"], v["timestamp"], v["body"]) == v["signature"]
    key32 = "whsec_" + base64.b64encode(bytes(range(32))).decode()
    cases = [
        ("hookd envelope, 32-byte key", key32, "01HZX3K8Q2N4V6B8D0F2H4J6K8", "1700000000", ENVELOPE),
        ("empty body", key32, "01HZX3K8Q2N4V6B8D0F2H4J6K9", "1700000000", ""),
    ]
    out = [dict(SPEC_VECTOR)]
    for n, s, i, ts, b in cases:
        out.append({"name": n, "source": "computed by gen_vectors.py", "secret": s, "id": i,
                    "timestamp": ts, "body": b, "signature": standard_sig(s, i, ts, b)})
    return out


def write(name, doc):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2, ensure_ascii=True)
        f.write("\n")


write("hookd.json", {
    "_comment": [
        "hookd scheme: X-Webhook-Signature = <alg>=hex(HMAC-<alg>(secret bytes, timestamp + '.' + body)),",
        "timestamp = X-Webhook-Timestamp (epoch milliseconds, decimal). body is the UTF-8 encoding of the JSON string.",
        "Generated independently of the Go code by gen_vectors.py (Python hmac/hashlib);",
        "every value was also cross-checked with `openssl dgst -<alg> -hmac <secret>`. Do not edit by hand.",
    ],
    "vectors": hookd_vectors(),
})
write("standard.json", {
    "_comment": [
        "Standard Webhooks scheme: webhook-signature = v1,base64(HMAC-SHA256(base64decode(secret minus 'whsec_'),",
        "id + '.' + timestamp + '.' + body)), timestamp = webhook-timestamp (epoch seconds).",
        "The first vector is copied from the public Standard Webhooks reference libraries (see its 'source');",
        "the others were computed by gen_vectors.py (Python hmac/base64), which reproduces the published one first.",
        "Do not edit by hand.",
    ],
    "vectors": standard_vectors(),
})
