package hookdtype

import (
	"encoding/base64"
	"errors"
	"fmt"
)

// DecodeMasterKey decodes one base64 master key (32 bytes) as the config and the key file hold
// it. Its message never quotes the value.
func DecodeMasterKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("not valid base64 (want 32 random bytes, base64; e.g. openssl rand -base64 32)")
	}
	if len(k) != 32 {
		return nil, fmt.Errorf("must decode to exactly 32 bytes, got %d", len(k))
	}
	return k, nil
}
