package redis

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// An error that quotes a URL is told without its password, and still wraps the error it
// redacts.
func TestRedactedErrorWraps(t *testing.T) {
	err := CheckURL("redis://user:s3cret@[::1")
	var urlErr *url.Error
	switch {
	case err == nil:
		t.Fatal("a malformed URL was accepted")
	case strings.Contains(err.Error(), "s3cret"):
		t.Errorf("the error tells the password: %v", err)
	case !errors.As(err, &urlErr):
		t.Errorf("%v does not wrap the url package's error", err)
	}
}
