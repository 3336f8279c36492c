package redis

import (
	"fmt"
	"strings"
)

// Files name what completes a client's options from outside its URL, each "" for none: the
// files of its passwords (mounted secrets) and of a rediss:// URL's TLS, and the name to verify
// Redis's certificates against.
type Files struct {
	Password, SentinelPassword string
	TLSCA, TLSCert, TLSKey     string
	TLSServerName              string

	// Read reads a file named above, whole. cmd/server passes its bounded read of the files
	// settings name, so that a setting naming a log or /dev/zero fails instead of filling
	// memory; this package reads files with no policy of its own. Nil is os.ReadFile.
	Read func(path string) ([]byte, error)
}

// URLSettings are the variables of the URLs set (BIGSEG_REDIS_URL, _CLUSTER_URL,
// _SENTINEL_URL), for messages; none when no Redis is configured.
func (o ClientOptions) URLSettings() []string {
	var set []string
	for _, v := range [][2]string{{"BIGSEG_REDIS_URL", o.URL}, {"BIGSEG_REDIS_CLUSTER_URL", o.ClusterURL},
		{"BIGSEG_REDIS_SENTINEL_URL", o.SentinelURL}} {
		if v[1] != "" {
			set = append(set, v[0])
		}
	}
	return set
}

// TLSOn says whether the URL is rediss://.
func (o ClientOptions) TLSOn() bool { return strings.HasPrefix(o.rawURL(), "rediss://") }

// Check says all that is wrong with the URLs and f together, at start, before any file is
// read, naming the variables at fault (BIGSEG_REDIS_*); secrets never appear in its messages.
func (o ClientOptions) Check(f Files) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	tlsFiles := [][2]string{ // in a fixed order, so that the joined errors read the same at every start
		{"BIGSEG_REDIS_TLS_CA_FILE", f.TLSCA}, {"BIGSEG_REDIS_TLS_CERT_FILE", f.TLSCert},
		{"BIGSEG_REDIS_TLS_KEY_FILE", f.TLSKey}, {"BIGSEG_REDIS_TLS_SERVER_NAME", f.TLSServerName},
	}
	set := o.URLSettings()
	if len(set) > 1 {
		bad("%s are set: choose one Redis topology", strings.Join(set, " and "))
	}
	if len(set) == 0 {
		for _, v := range append([][2]string{{"BIGSEG_REDIS_PASSWORD_FILE", f.Password},
			{"BIGSEG_REDIS_SENTINEL_PASSWORD_FILE", f.SentinelPassword}}, tlsFiles...) {
			if v[1] != "" {
				bad("%s is set but no Redis is: set BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_URL or BIGSEG_REDIS_SENTINEL_URL", v[0])
			}
		}
		return errs
	}
	if err := o.CheckURL(); err != nil {
		return append(errs, fmt.Errorf("%s: %w", set[0], err))
	}
	pass, sentinelPass := o.URLCredentials()
	if pass && f.Password != "" {
		bad("%s has a password and BIGSEG_REDIS_PASSWORD_FILE is set: choose one", set[0])
	}
	if sentinelPass && f.SentinelPassword != "" {
		bad("BIGSEG_REDIS_SENTINEL_URL has the sentinels' password and BIGSEG_REDIS_SENTINEL_PASSWORD_FILE is set: choose one")
	}
	if f.SentinelPassword != "" && o.SentinelURL == "" {
		bad("BIGSEG_REDIS_SENTINEL_PASSWORD_FILE is set without BIGSEG_REDIS_SENTINEL_URL")
	}
	for _, v := range tlsFiles {
		if v[1] != "" && !o.TLSOn() {
			bad("%s is set but TLS is off: use a rediss:// URL", v[0])
		}
	}
	if (f.TLSCert == "") != (f.TLSKey == "") {
		bad("BIGSEG_REDIS_TLS_CERT_FILE and BIGSEG_REDIS_TLS_KEY_FILE go together")
	}
	return errs
}

// WithFiles returns o with the passwords and the TLS configuration read from f's files, with
// f.Read.
func (o ClientOptions) WithFiles(f Files) (_ ClientOptions, err error) {
	if o.Password, err = f.secret(f.Password); err != nil {
		return o, fmt.Errorf("BIGSEG_REDIS_PASSWORD_FILE: %w", err)
	}
	if o.SentinelPassword, err = f.secret(f.SentinelPassword); err != nil {
		return o, fmt.Errorf("BIGSEG_REDIS_SENTINEL_PASSWORD_FILE: %w", err)
	}
	if o.TLS, err = f.tlsConfig(); err != nil {
		return o, fmt.Errorf("BIGSEG_REDIS_TLS_CA_FILE, _CERT_FILE or _KEY_FILE: %w", err)
	}
	return o, nil
}
