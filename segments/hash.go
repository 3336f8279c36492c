package segments

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// HashLen is the length of a context hash: a SHA-256 (32 bytes) in padded base64. It is the
// only scheme LaunchDarkly's synchronizers and SDKs use, so it is the only one accepted.
const HashLen = 44

// Hash returns the Big Segments hash of a context key, under which synchronizers store its
// memberships: standard, padded base64 of the SHA-256 of the key's bytes.
func Hash(contextKey string) string {
	sum := sha256.Sum256([]byte(contextKey))
	var b [HashLen]byte
	base64.StdEncoding.Encode(b[:], sum[:])
	return string(b[:]) // one allocation, where EncodeToString makes two
}

// hashWanted ends every ValidateHash error: what a context hash is.
const hashWanted = "a context hash is the standard base64 (44 characters, padded) of the 32-byte SHA-256 of the context key"

// ValidateHash says why s cannot be a context hash, or nil: it must be the standard, padded
// base64 of 32 bytes in canonical form, so that a caller's mistake (hex, a URL-safe alphabet,
// a lost escape) is an error, not "no membership".
func ValidateHash(s string) error {
	if s == "" {
		return errors.New("context hash is empty; " + hashWanted)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return fmt.Errorf("context hash has a character outside the standard base64 alphabet at offset %d; %s", i, hashWanted)
		}
	}
	if len(s) != HashLen {
		if isHex(s) {
			return errors.New("context hash looks like hex; " + hashWanted)
		}
		return fmt.Errorf("context hash is %d characters long; %s", len(s), hashWanted)
	}
	if b, err := base64.StdEncoding.Strict().DecodeString(s); err != nil || len(b) != sha256.Size {
		return errors.New("context hash is not the canonical padded base64 of 32 bytes; " + hashWanted)
	}
	return nil
}

// isHex says whether s holds only hexadecimal digits, as a hash written in hex does.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
