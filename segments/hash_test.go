package segments

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestHash(t *testing.T) {
	tests := []struct{ key, want string }{
		{"", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="},
		{"dave", "YeoIA/iFNSO3d9QUrOMTDNTT+S3izX/4aVwzfXnC7u4="},
		{"alice", "K9gGyX8OAK8aH8Myj6djqSaXI8jbj6xPk69x2xhtbpA="}, // README's example, as the SDKs hash it
	}
	for _, tt := range tests {
		if got := Hash(tt.key); got != tt.want {
			t.Errorf("Hash(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func TestValidateHash(t *testing.T) {
	h := Hash("alice")
	sum := sha256.Sum256([]byte("alice"))
	tests := []struct {
		hash string
		want string // in the error; "" for a valid hash
	}{
		{h, ""},
		{Hash(""), ""},
		{"", "empty"},
		{hex.EncodeToString(sum[:]), "looks like hex"},                  // 64 characters, valid base64 of 48 bytes
		{strings.ToUpper(hex.EncodeToString(sum[:])), "looks like hex"}, // upper-case hex
		{hex.EncodeToString(sum[:20]), "looks like hex"},                // a SHA-1's 40 hex digits
		{"YWJj", ""},                   // base64 of 3 bytes, as a store suite may send
		{"userhash", ""},               // LaunchDarkly's store suites' hash
		{"QQ==", ""},                   // base64 of 1 byte
		{"QR==", "not canonical"},      // decodes as "QQ==" does
		{h[:43], "not canonical"},      // not padded
		{h + "=", "not canonical"},     // padded twice
		{strings.Repeat("Q", 128), ""}, // base64 of 96 bytes, the longest
		{strings.Repeat("Q", 132), "132 characters long, more than 128"}, // longer
		{h[:42] + "B=", "not canonical"},                                 // decodes as h does
		{h[:10] + " " + h[11:], "outside the standard base64 alphabet"},  // a '+' that lost its escaping
		{h[:10] + "-" + h[11:], "outside the standard base64 alphabet"},  // URL-safe alphabet
		{h[:10] + "=" + h[11:], "not canonical"},                         // padding in the wrong place
	}
	for _, tt := range tests {
		err := ValidateHash(tt.hash)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("ValidateHash(%q) = %v, want nil", tt.hash, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "32-byte SHA-256")):
			t.Errorf("ValidateHash(%q) = %v, want an error with %q saying what a hash is", tt.hash, err, tt.want)
		}
	}
}

func BenchmarkHash(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Hash("user-0123456789")
	}
}
