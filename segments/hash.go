package segments

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// MaxHashLen bounds the length of a context hash accepted from callers. A real hash (base64 of
// SHA-256) is 44 characters; the bound leaves room for other hash schemes while keeping
// malformed input from turning into large store keys.
const MaxHashLen = 128

// Hash returns the Big Segments hash of a context key: standard, padded base64 of the SHA-256
// of the key's bytes. Synchronizers store memberships under this hash, never under the key, so
// every lookup by key starts here.
func Hash(contextKey string) string {
	sum := sha256.Sum256([]byte(contextKey))
	var b [44]byte // base64.StdEncoding.EncodedLen(sha256.Size)
	base64.StdEncoding.Encode(b[:], sum[:])
	return string(b[:]) // one allocation, where EncodeToString makes two
}

// ValidateHash reports why s cannot be a context hash, or nil when it can: it must be non-empty,
// at most MaxHashLen characters, and valid standard base64 with padding, in the one form an
// encoder writes (unused bits zero: "QQ==", not "QR==", which decodes the same). Checking this
// before a store read keeps callers' mistakes (a URL-safe alphabet, a missing escape) from
// looking like "no membership".
func ValidateHash(s string) error {
	if s == "" {
		return errors.New("context hash is empty")
	}
	if len(s) > MaxHashLen {
		return fmt.Errorf("context hash is longer than %d characters", MaxHashLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return fmt.Errorf("context hash has a character outside the standard base64 alphabet at offset %d", i)
		}
	}
	if _, err := base64.StdEncoding.Strict().DecodeString(s); err != nil {
		return errors.New("context hash is not valid padded standard base64 (in canonical form)")
	}
	return nil
}
