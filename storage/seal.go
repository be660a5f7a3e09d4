package storage

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hookd/hookd/hookdtype"
)

// Sealer encrypts secrets at rest with AES-256-GCM. A sealed value is
// version(1) || nonce(12) || ciphertext+tag; the table and column go in as additional data so a
// sealed value copied into another column does not open. It seals with its first key and opens
// with any (key rotation: masterKeys [new, old…]).
type Sealer struct {
	aead  cipher.AEAD   // the first key's: sealing
	aeads []cipher.AEAD // every key's, first first: opening
}

const sealVersion = 1

// NewSealer takes 32-byte keys: the first seals, any opens.
func NewSealer(keys ...[]byte) (*Sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("no master key")
	}
	s := &Sealer{}
	for i, key := range keys {
		if len(key) != 32 {
			return nil, fmt.Errorf("master key %d must be 32 bytes, got %d", i+1, len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		s.aeads = append(s.aeads, aead)
	}
	s.aead = s.aeads[0]
	return s, nil
}

// Seal encrypts plaintext bound to where it is stored. Empty plaintext seals to nil.
func (s *Sealer) Seal(plaintext []byte, where string) []byte {
	if len(plaintext) == 0 {
		return nil
	}
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(plaintext)+s.aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		panic("storage: no randomness: " + err.Error())
	}
	return s.aead.Seal(out, out[1:1+s.aead.NonceSize()], plaintext, []byte(where))
}

// Open decrypts a value sealed for the same place.
func (s *Sealer) Open(sealed []byte, where string) ([]byte, error) {
	pt, _, err := s.open(sealed, where)
	return pt, err
}

// open is Open that also tells which key opened the value (its index in NewSealer's keys).
func (s *Sealer) open(sealed []byte, where string) (plaintext []byte, key int, err error) {
	if len(sealed) == 0 {
		return nil, 0, nil
	}
	n := s.aead.NonceSize()
	if len(sealed) < 1+n+s.aead.Overhead() || sealed[0] != sealVersion {
		return nil, -1, errors.New("storage: sealed value malformed")
	}
	for i, aead := range s.aeads {
		if pt, err := aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(where)); err == nil {
			return pt, i, nil
		}
	}
	return nil, -1, ErrSealedUnreadable
}

// ErrSealedUnreadable: a sealed value opens with none of the master keys.
var ErrSealedUnreadable = errors.New("storage: sealed value does not open with any configured master key")

// LoadOrCreateKey returns the master key: the configured one (base64) when set, else the one in
// dataDir/master.key, created there (mode 0600) on first start.
func LoadOrCreateKey(configured, dataDir string) (key []byte, created bool, err error) {
	if configured != "" {
		key, err := hookdtype.DecodeMasterKey(configured)
		if err != nil {
			return nil, false, fmt.Errorf("masterKey: %w", err)
		}
		return key, false, nil
	}
	path := filepath.Join(dataDir, "master.key")
	if b, err := os.ReadFile(path); err == nil {
		key, err := hookdtype.DecodeMasterKey(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, false, fmt.Errorf("masterKey file %s: %w", path, err)
		}
		return key, false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("masterKey file: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, false, fmt.Errorf("masterKey: create %s: %w", dataDir, err)
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) { // another process won the race: use its key
			return LoadOrCreateKey("", dataDir)
		}
		return nil, false, fmt.Errorf("masterKey: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		return nil, false, fmt.Errorf("masterKey: write %s: %w", path, err)
	}
	return key, true, f.Sync()
}
