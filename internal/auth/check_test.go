package auth_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/internal/auth"
)

// CheckTLS names every setting at fault, all at once.
func TestCheckTLS(t *testing.T) {
	if errs := auth.CheckTLS("c.pem", "k.pem", "ca.pem", true, ":9090"); len(errs) != 0 {
		t.Errorf("a whole configuration: %v", errs)
	}
	err := errors.Join(auth.CheckTLS("", "k.pem", "ca.pem", true, "")...)
	for _, want := range []string{"BIGSEG_TLS_CERT_FILE and BIGSEG_TLS_KEY_FILE go together",
		"BIGSEG_TLS_CLIENT_CA_FILE is set without BIGSEG_TLS_CERT_FILE", "BIGSEG_METRICS_TLS needs BIGSEG_TLS_CERT_FILE and BIGSEG_METRICS_ADDR"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want %q in it", err, want)
		}
	}
}

// CheckTokens refuses a list beside a file, and an empty token in the list, naming the
// variables.
func TestCheckTokens(t *testing.T) {
	for _, ok := range [][]string{nil, {"a-token", "another"}} {
		if errs := auth.CheckTokens(ok, ""); len(errs) != 0 {
			t.Errorf("%q: %v", ok, errs)
		}
	}
	if errs := auth.CheckTokens(nil, "tokens.txt"); len(errs) != 0 {
		t.Errorf("a file: %v", errs)
	}
	err := errors.Join(auth.CheckTokens([]string{"a-token", " "}, "tokens.txt")...)
	for _, want := range []string{"BIGSEG_API_TOKENS and BIGSEG_API_TOKENS_FILE are both set", "BIGSEG_API_TOKENS: holds an empty token"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want %q in it", err, want)
		}
	}
}
