package segments

import (
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
	tests := []struct {
		hash string
		ok   bool
	}{
		{Hash("alice"), true},
		{"YWJj", true},
		{"", false},
		{"abc", false},      // not padded
		{"YW Jj", false},    // a '+' that lost its escaping
		{"-_-_", false},     // URL-safe alphabet
		{"YWJj====", false}, // padding in the wrong place
		{"QQ==", true},
		{"QR==", false},                   // not canonical: decodes as "QQ==" does
		{strings.Repeat("A", 132), false}, // too long
		{strings.Repeat("A", 128), true},
	}
	for _, tt := range tests {
		err := ValidateHash(tt.hash)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateHash(%q) = %v, want ok=%v", tt.hash, err, tt.ok)
		}
	}
}

func BenchmarkHash(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Hash("user-0123456789")
	}
}
