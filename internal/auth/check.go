package auth

import (
	"errors"
	"slices"
	"strings"
)

// CheckTLS says, at start, what is wrong with the listeners' TLS settings together, naming
// their variables: a certificate goes with its key, mutual TLS (clientCAFile) needs TLS, and the
// metrics listener's TLS (metricsTLS) needs TLS and that listener (metricsAddr).
func CheckTLS(certFile, keyFile, clientCAFile string, metricsTLS bool, metricsAddr string) []error {
	var errs []error
	if (certFile == "") != (keyFile == "") {
		errs = append(errs, errors.New("BIGSEG_TLS_CERT_FILE and BIGSEG_TLS_KEY_FILE go together"))
	}
	if clientCAFile != "" && certFile == "" {
		errs = append(errs, errors.New("BIGSEG_TLS_CLIENT_CA_FILE is set without BIGSEG_TLS_CERT_FILE: mutual TLS needs TLS"))
	}
	if metricsTLS && (certFile == "" || metricsAddr == "") {
		errs = append(errs, errors.New("BIGSEG_METRICS_TLS needs BIGSEG_TLS_CERT_FILE and BIGSEG_METRICS_ADDR"))
	}
	return errs
}

// CheckTokens says, at start, what is wrong with the token settings together, naming their
// variables: a list and a file are two sources of truth, and an empty token in the list (a
// stray comma) is more likely a mistake than a wish.
func CheckTokens(list []string, file string) []error {
	var errs []error
	if len(list) > 0 && file != "" {
		errs = append(errs, errors.New("BIGSEG_API_TOKENS and BIGSEG_API_TOKENS_FILE are both set: choose one"))
	}
	if slices.ContainsFunc(list, func(t string) bool { return strings.TrimSpace(t) == "" }) {
		errs = append(errs, errors.New("BIGSEG_API_TOKENS: holds an empty token"))
	}
	return errs
}
