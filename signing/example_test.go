package signing_test

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/hookd/hookd/signing"
)

func ExampleSign() {
	fmt.Println(signing.Sign("hookd-test-secret", "1700000000000", []byte("")))
	// Output: sha256=3c832218f0d6a5edcde8af9a91f794b12e3cbdea166fabaf39e569a80f6d782d
}

func ExampleVerify() {
	body := []byte("")
	ts := "1700000000000"
	sig := "sha256=3c832218f0d6a5edcde8af9a91f794b12e3cbdea166fabaf39e569a80f6d782d"
	now := time.UnixMilli(1700000060000) // one minute later: inside the ±5 min window

	fmt.Println(signing.Verify("hookd-test-secret", ts, sig, body, 0, now))
	err := signing.Verify("hookd-test-secret", ts, sig, body, 0, now.Add(10*time.Minute))
	fmt.Println(errors.Is(err, signing.ErrTimestampOutOfWindow))
	// Output:
	// <nil>
	// true
}

func ExampleSignStandard() {
	// The published Standard Webhooks test vector.
	sig, err := signing.SignStandard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	fmt.Println(sig, err)
	// Output: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= <nil>
}

func ExampleVerifyRequest() {
	secret := os.Getenv("WEBHOOK_SECRET")
	http.HandleFunc("/hookd", func(w http.ResponseWriter, r *http.Request) {
		body, err := signing.VerifyRequest(r, secret, 0, 1<<20)
		switch {
		case errors.Is(err, signing.ErrBodyTooLarge):
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			log.Printf("rejected webhook: %v", err)
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		_ = body // authentic: parse, dedupe on eventId, process.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"decision":"allow"}`)
	})
}
