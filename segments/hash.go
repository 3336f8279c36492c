package segments

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// MaxHashLen bounds a context hash from callers. A SHA-256 hash, all that synchronizers and
// SDKs write, is 44 characters; LaunchDarkly's own store test suites send shorter ones (such
// as the 8 of "userhash"), which a store must answer, so any canonical base64 up to this long
// is accepted, and malformed input never turns into large store keys.
const MaxHashLen = 128

// Hash returns the Big Segments hash of a context key, under which synchronizers store its
// memberships: standard, padded base64 of the SHA-256 of the key's bytes.
func Hash(contextKey string) string {
	sum := sha256.Sum256([]byte(contextKey))
	var b [44]byte
	base64.StdEncoding.Encode(b[:], sum[:])
	return string(b[:]) // one allocation, where EncodeToString makes two
}

// hashWanted ends every ValidateHash error: what a context hash is.
const hashWanted = "a context hash is the standard base64 (44 characters, padded) of the 32-byte SHA-256 of the context key"

// ValidateHash says why s cannot be a context hash, or nil: it must be standard, padded
// base64 in canonical form (unused bits zero: "QQ==", not "QR==", which decodes the same), at
// most MaxHashLen long, and not a hex digest, so that a caller's mistake (a hex SHA-256, a
// URL-safe alphabet, a lost escape) is an error, not "no membership".
func ValidateHash(s string) error {
	if s == "" {
		return errors.New("context hash is empty; " + hashWanted)
	}
	if len(s) > MaxHashLen {
		return fmt.Errorf("context hash is %d characters long, more than %d; %s", len(s), MaxHashLen, hashWanted)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return fmt.Errorf("context hash has a character outside the standard base64 alphabet at offset %d; %s", i, hashWanted)
		}
	}
	// A digest in hex (64 characters for SHA-256, 40 for SHA-1) is also valid base64, of other
	// bytes: the SHA-256 of a real key written in base64 is never all hex digits.
	if len(s) >= 32 && isHex(s) {
		return errors.New("context hash looks like hex; " + hashWanted)
	}
	if _, err := base64.StdEncoding.Strict().DecodeString(s); err != nil {
		return errors.New("context hash is not canonical padded base64; " + hashWanted)
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
