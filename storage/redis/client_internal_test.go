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
	for _, tc := range []struct{ url, secret string }{
		{"redis://user:s3cret@[::1", "s3cret"},
		{`redis://u:hunter"2@h:6379`, `hunter`}, // quoted by url.Error as hunter\"2
		{`redis://u:back\slash@h:6379`, `back`},
		{"redis://u:tab\tpass@h:6379", `tab`},
	} {
		err := CheckURL(tc.url)
		var urlErr *url.Error
		switch {
		case err == nil:
			t.Errorf("%q: a malformed URL was accepted", tc.url)
		case strings.Contains(err.Error(), tc.secret):
			t.Errorf("%q: the error tells the password: %v", tc.url, err)
		case !errors.As(err, &urlErr):
			t.Errorf("%q: %v does not wrap the url package's error", tc.url, err)
		case strings.Contains(urlErr.Error(), tc.secret):
			t.Errorf("%q: the url package's error it wraps tells the password: %v", tc.url, urlErr)
		}
	}
}

// A URL without its scheme is told without its user information too.
func TestURLWithoutSchemeIsRedacted(t *testing.T) {
	for _, u := range []string{"user:s3cret@host:6379", ":s3cret@host:6379", "s3cret@host"} {
		if err := CheckURL(u); err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), `"xxxxx@host`) {
			t.Errorf("CheckURL(%q) = %v, want an error that names xxxxx@host, none of the user information", u, err)
		}
	}
}
