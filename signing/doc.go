// Package signing signs and verifies hookd webhooks. The hookd daemon uses
// it to sign; receivers import it to check that a delivery really comes from
// hookd, was not changed in transit, and is not an old delivery replayed.
//
// # hookd scheme (default)
//
// Each delivery carries two headers:
//
//	X-Webhook-Timestamp: 1700000000000                  (epoch milliseconds)
//	X-Webhook-Signature: sha256=<lowercase hex>
//
// The signature is HMAC-SHA256, keyed with the hook's secret, over
// timestamp + "." + body, where body is the exact bytes received. Receivers
// must read the "<alg>=" prefix rather than assume sha256, so the algorithm
// can change later; sha512 is the documented next one and is already
// accepted. See [Sign] and [Verify].
//
// # Standard Webhooks scheme (per hook, optional)
//
// A hook can instead be signed as described at https://www.standardwebhooks.com/:
//
//	webhook-id:        <eventId>
//	webhook-timestamp: 1700000000                      (epoch seconds)
//	webhook-signature: v1,<base64> [v1,<base64> ...]
//
// over id + "." + timestamp + "." + body, keyed with the base64-decoded part
// of a "whsec_<base64>" secret. Existing Standard Webhooks libraries verify
// these too. See [SignStandard], [VerifyStandard] and [NewStandardSecret].
//
// # Receiving
//
// Both schemes reject timestamps more than [DefaultTolerance] (5 minutes)
// from the receiver's clock, in either direction, and compare signatures in
// constant time. Failures are errors wrapping one of the Err* sentinels;
// nothing panics on hostile input.
//
// A net/http receiver needs one call, [VerifyRequest], which bounds the body
// read and picks the scheme from the headers:
//
//	http.HandleFunc("/hookd", func(w http.ResponseWriter, r *http.Request) {
//		body, err := signing.VerifyRequest(r, os.Getenv("WEBHOOK_SECRET"), 0, 1<<20)
//		if errors.Is(err, signing.ErrBodyTooLarge) {
//			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
//			return
//		}
//		if err != nil {
//			log.Printf("rejected webhook: %v", err) // never contains the secret
//			http.Error(w, "invalid signature", http.StatusUnauthorized)
//			return
//		}
//		var env struct {
//			EventID string `json:"eventId"`
//		}
//		if err := json.Unmarshal(body, &env); err != nil {
//			http.Error(w, "bad json", http.StatusBadRequest)
//			return
//		}
//		// Retries repeat the eventId: process each eventId once.
//		w.WriteHeader(http.StatusNoContent)
//	})
//
// Frameworks that have already read the body can call [Verify] or
// [VerifyStandard] with the raw bytes and header values directly.
package signing
