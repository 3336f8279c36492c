package redis_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/storage/redis"
)

// Check names every setting at fault, all at once, and never a password.
func TestCheckNamesTheSettings(t *testing.T) {
	for _, tc := range []struct {
		o    redis.ClientOptions
		f    redis.Files
		want []string // each a part of the joined errors; none: no error
	}{
		{redis.ClientOptions{URL: "redis://h:6379"}, redis.Files{}, nil},
		{redis.ClientOptions{URL: "rediss://h:6379"}, redis.Files{TLSCA: "ca.pem", TLSCert: "c.pem", TLSKey: "k.pem"}, nil},
		{redis.ClientOptions{URL: "redis://a:1", ClusterURL: "redis://b:1"}, redis.Files{},
			[]string{"BIGSEG_REDIS_URL and BIGSEG_REDIS_CLUSTER_URL are set: choose one Redis topology"}},
		{redis.ClientOptions{}, redis.Files{Password: "p", TLSServerName: "n"},
			[]string{"BIGSEG_REDIS_PASSWORD_FILE is set but no Redis is", "BIGSEG_REDIS_TLS_SERVER_NAME is set but no Redis is"}},
		{redis.ClientOptions{URL: "h:6379"}, redis.Files{}, []string{"BIGSEG_REDIS_URL: "}},
		{redis.ClientOptions{URL: "redis://:s3cret@h:6379"}, redis.Files{Password: "p"},
			[]string{"BIGSEG_REDIS_URL has a password and BIGSEG_REDIS_PASSWORD_FILE is set"}},
		{redis.ClientOptions{URL: "redis://h:6379"}, redis.Files{SentinelPassword: "p", TLSCert: "c.pem"},
			[]string{"BIGSEG_REDIS_SENTINEL_PASSWORD_FILE is set without BIGSEG_REDIS_SENTINEL_URL",
				"BIGSEG_REDIS_TLS_CERT_FILE is set but TLS is off", "BIGSEG_REDIS_TLS_CERT_FILE and BIGSEG_REDIS_TLS_KEY_FILE go together"}},
	} {
		err := errors.Join(tc.o.Check(tc.f)...)
		if len(tc.want) == 0 && err != nil {
			t.Errorf("%+v %+v: %v", tc.o, tc.f, err)
		}
		if len(tc.want) > 0 && err == nil {
			t.Errorf("%+v %+v: no error, want %q", tc.o, tc.f, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v %+v: %v; want %q in it", tc.o, tc.f, err, w)
			}
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("a password in %v", err)
		}
	}
}

// WithFiles names the variable of a file it cannot read.
func TestWithFilesNamesTheFile(t *testing.T) {
	_, err := redis.ClientOptions{URL: "redis://h:6379"}.WithFiles(redis.Files{Password: t.TempDir() + "/none"})
	if err == nil || !strings.HasPrefix(err.Error(), "BIGSEG_REDIS_PASSWORD_FILE: ") {
		t.Fatalf("err = %v, want one naming BIGSEG_REDIS_PASSWORD_FILE", err)
	}
}
