package redis_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/storage/redis"
)

// A secret file's one trailing newline is not part of the secret; a file that is not a CA
// bundle or a key pair is an error that says which; files are read with Files.Read.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/pw", []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := redis.ClientOptions{URL: "rediss://h:6379"}
	if o, err := url.WithFiles(redis.Files{Password: dir + "/pw", SentinelPassword: dir + "/pw"}); err != nil || o.Password != "hunter2" || o.SentinelPassword != "hunter2" {
		t.Errorf("passwords %q and %q, %v; want hunter2", o.Password, o.SentinelPassword, err)
	}
	if o, err := url.WithFiles(redis.Files{}); err != nil || o.Password != "" {
		t.Errorf("no file: %q, %v", o.Password, err)
	}
	if _, err := url.WithFiles(redis.Files{TLSCA: dir + "/pw"}); err == nil || !strings.Contains(err.Error(), "CA file: no PEM certificate") {
		t.Errorf("a CA file that is not one: %v", err)
	}
	if _, err := url.WithFiles(redis.Files{TLSCert: dir + "/pw", TLSKey: dir + "/pw"}); err == nil || !strings.Contains(err.Error(), "client certificate") {
		t.Errorf("a key pair that is not one: %v", err)
	}
	if o, err := url.WithFiles(redis.Files{TLSServerName: "redis.internal"}); err != nil || o.TLS.ServerName != "redis.internal" {
		t.Errorf("a server name: %v, %v", o.TLS, err)
	}
	refused := errors.New("too large")
	var asked []string
	read := func(path string) ([]byte, error) { asked = append(asked, path); return nil, refused }
	if _, err := url.WithFiles(redis.Files{TLSCA: dir + "/pw", Read: read}); !errors.Is(err, refused) || len(asked) != 1 {
		t.Errorf("Read refused the file: %v (asked for %v)", err, asked)
	}
}
