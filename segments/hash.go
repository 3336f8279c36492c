package segments

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// MaxHashLen bounds a context hash from callers: a SHA-256 one is 44 characters; the bound
// leaves room for other schemes but not for large store keys.
const MaxHashLen = 128

// Hash returns the Big Segments hash of a context key, under which synchronizers store its
// memberships: standard, padded base64 of the SHA-256 of the key's bytes.
func Hash(contextKey string) string {
	sum := sha256.Sum256([]byte(contextKey))
	var b [44]byte // base64.StdEncoding.EncodedLen(sha256.Size)
	base64.StdEncoding.Encode(b[:], sum[:])
	return string(b[:]) // one allocation, where EncodeToString makes two
}

// ValidateHash says why s cannot be a context hash, or nil: it must be padded standard base64
// in canonical form, at most MaxHashLen long, so that a caller's mistake (a URL-safe alphabet,
// a lost escape) is an error, not "no membership".
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
