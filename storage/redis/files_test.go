package redis_test

import (
	"os"
	"strings"
	"testing"

	"github.com/bigseg/bigseg/storage/redis"
)

// A secret file's one trailing newline is not part of the secret; a file that is not a CA
// bundle or a key pair is an error that says which.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/pw", []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pw, err := redis.ReadSecret(dir + "/pw"); err != nil || pw != "hunter2" {
		t.Errorf("ReadSecret = %q, %v", pw, err)
	}
	if pw, err := redis.ReadSecret(""); err != nil || pw != "" {
		t.Errorf("no file: %q, %v", pw, err)
	}
	if _, err := redis.TLSFiles(dir+"/pw", "", "", ""); err == nil || !strings.Contains(err.Error(), "CA file: no PEM certificate") {
		t.Errorf("a CA file that is not one: %v", err)
	}
	if _, err := redis.TLSFiles("", dir+"/pw", dir+"/pw", ""); err == nil || !strings.Contains(err.Error(), "client certificate") {
		t.Errorf("a key pair that is not one: %v", err)
	}
	if tc, err := redis.TLSFiles("", "", "", "redis.internal"); err != nil || tc.ServerName != "redis.internal" {
		t.Errorf("a server name: %v, %v", tc, err)
	}
}
