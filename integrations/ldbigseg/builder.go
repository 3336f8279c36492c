package ldbigseg

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/launchdarkly/go-sdk-common/v3/ldvalue"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems"
)

// DefaultBaseURL is where the store finds bigseg unless BaseURL says otherwise: bigseg's default
// address (BIGSEG_ADDR=:8080) on the same host, as ldredis defaults to a local Redis.
const DefaultBaseURL = "http://localhost:8080"

// DefaultTimeout bounds each request to bigseg, from sending it to reading the whole answer.
//
// An SDK evaluation waits for the store on a cache miss, so the bound is an evaluation's worst
// case. 3 s is longer than bigseg itself takes to give up on a failing Redis with its defaults
// (1 s to dial, 500 ms per read, one retry: about 2 s at worst), so that the SDK sees bigseg's
// own 503 and its reason rather than a timeout of ours; and it is the read timeout that
// go-redis, under ldredis, gives a direct Redis reader by default.
const DefaultTimeout = 3 * time.Second

// StoreBuilder configures the bigseg Big Segment store. Get one from BigSegmentStore, set
// options with its methods, and give it to ldcomponents.BigSegments. Its zero value is not
// usable.
type StoreBuilder struct {
	baseURL     string
	environment string
	token       string
	client      *http.Client
	timeout     time.Duration
	bounds      bounds
}

// Interface checks: the SDK builds the store from this, and describes it in diagnostics.
var (
	_ subsystems.ComponentConfigurer[subsystems.BigSegmentStore] = (*StoreBuilder)(nil)
	_ subsystems.DiagnosticDescription                           = (*StoreBuilder)(nil)
)

// BigSegmentStore returns a builder for a Big Segment store that reads bigseg over HTTP, with
// DefaultBaseURL, no bearer token, a client of its own, DefaultTimeout, DefaultMaxRefs and
// DefaultMaxRefBytes.
func BigSegmentStore() *StoreBuilder {
	return &StoreBuilder{
		baseURL: DefaultBaseURL,
		timeout: DefaultTimeout,
		bounds:  bounds{maxRefs: DefaultMaxRefs, maxRefBytes: DefaultMaxRefBytes},
	}
}

// BaseURL sets bigseg's address: http:// or https://, with a path if bigseg is served under
// one (behind a reverse proxy, say). The store adds /memberships and /status to it.
func (b *StoreBuilder) BaseURL(baseURL string) *StoreBuilder {
	b.baseURL = baseURL
	return b
}

// Environment makes the store read one environment of a bigseg that serves several
// (BIGSEG_ENVIRONMENTS=production=ld-prod,staging=ld-staging): its lookups and status are then
// those under /environments/{name}/, which only that environment's data answers. A name is
// lower-case letters, digits, - and _, starting with a letter or digit, at most 63 characters,
// as bigseg's own; another is an error from Build. Surrounding white space is ignored, and ""
// (the default) means the unscoped routes, which a bigseg serving one environment answers
// (that environment is also named "default").
//
// A bigseg answers 404 for an environment it does not serve, and 403 for a bearer token that
// does not open this one (a scoped token of BIGSEG_API_TOKENS_FILE): both are an [HTTPError]
// saying so. bigseg's /status is open, so with such a token the SDK still reports the store
// available while its evaluations get STORE_ERROR.
func (b *StoreBuilder) Environment(name string) *StoreBuilder {
	b.environment = strings.TrimSpace(name)
	return b
}

// BearerToken sets the token sent as "Authorization: Bearer <token>", for a bigseg that
// requires one (BIGSEG_API_TOKENS). Surrounding white space, such as the newline of a mounted
// secret file, is ignored. The token never appears in errors or logs.
func (b *StoreBuilder) BearerToken(token string) *StoreBuilder {
	b.token = strings.TrimSpace(token)
	return b
}

// HTTPClient makes the store send its requests with client instead of a client of its own,
// for a transport with custom TLS, proxies or instrumentation. The store then neither changes
// the client nor closes its connections; Timeout still bounds every request.
func (b *StoreBuilder) HTTPClient(client *http.Client) *StoreBuilder {
	b.client = client
	return b
}

// Timeout bounds each request, from sending it to reading the whole answer. Zero or negative
// means DefaultTimeout: a request is never unbounded.
func (b *StoreBuilder) Timeout(d time.Duration) *StoreBuilder {
	if d <= 0 {
		d = DefaultTimeout
	}
	b.timeout = d
	return b
}

// MaxRefs bounds how many segment refs one membership answer may list: an answer with more is
// an error (ErrAnswerTooLarge), so the SDK caches nothing of it and that evaluation gets
// STORE_ERROR. Zero or negative means DefaultMaxRefs: an answer is never unbounded. Raise it
// only for contexts really listed in more Big Segments; the SDK's cache may hold
// ContextCacheSize answers of this size.
func (b *StoreBuilder) MaxRefs(n int) *StoreBuilder {
	if n <= 0 {
		n = DefaultMaxRefs
	}
	b.bounds.maxRefs = n
	return b
}

// MaxRefBytes bounds how many bytes of segment refs (their lengths added up) one membership
// answer may hold, as MaxRefs bounds their number. Zero or negative means DefaultMaxRefBytes.
// The most of a response the store reads follows from both: 6 × MaxRefBytes + 9 × MaxRefs +
// 4 KiB, the longest JSON an answer within them can be.
func (b *StoreBuilder) MaxRefBytes(n int) *StoreBuilder {
	if n <= 0 {
		n = DefaultMaxRefBytes
	}
	b.bounds.maxRefBytes = n
	return b
}

// Build is called by the SDK to make the store. It checks the options, and logs through the
// SDK's loggers where the store reads from (never the token).
func (b *StoreBuilder) Build(clientContext subsystems.ClientContext) (subsystems.BigSegmentStore, error) {
	base, err := parseBaseURL(b.baseURL)
	if err != nil {
		return nil, err
	}
	if err := checkEnvironment(b.environment); err != nil {
		return nil, err
	}
	if err := checkToken(b.token); err != nil {
		return nil, err
	}
	loggers := clientContext.GetLogging().Loggers
	if b.environment != "" {
		loggers.Infof("Big Segment store: bigseg at %s, environment %s", base.Redacted(), b.environment)
	} else {
		loggers.Infof("Big Segment store: bigseg at %s", base.Redacted())
	}
	if b.token != "" && base.Scheme == "http" && !isLoopback(base.Hostname()) {
		loggers.Warnf("Big Segment store: the bigseg bearer token is sent to %s over plain HTTP; use https:// off the local host", base.Host)
	}
	return newStore(base, b.environment, b.token, b.client, b.timeout, b.bounds), nil
}

// DescribeConfiguration names the store in the SDK's diagnostic events.
func (b *StoreBuilder) DescribeConfiguration(subsystems.ClientContext) ldvalue.Value {
	return ldvalue.String("bigseg")
}

// parseBaseURL checks a base URL and returns it without a trailing slash.
func parseBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		// url.Parse's error quotes the URL, which may hold a password: say less.
		return nil, errors.New("bigseg base URL: not a valid URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("bigseg base URL: scheme must be http or https, not %q", u.Scheme)
	case u.Host == "":
		return nil, errors.New("bigseg base URL: no host")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("bigseg base URL: must not have a query or a fragment")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	return u, nil
}

// environmentName is what bigseg accepts as an environment's name (BIGSEG_ENVIRONMENTS): safe
// in a path as it is, so the store never escapes it.
var environmentName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// checkEnvironment rejects a name bigseg cannot serve; "" is no environment.
func checkEnvironment(name string) error {
	if name == "" || environmentName.MatchString(name) {
		return nil
	}
	quoted := name
	if len(quoted) > 70 {
		quoted = quoted[:64] + "..."
	}
	return fmt.Errorf("bigseg environment: %q is not an environment name: lower-case letters, digits, - and _, starting with a letter or digit, at most 63 characters (as in BIGSEG_ENVIRONMENTS)", quoted)
}

// checkToken rejects a token that cannot be sent as a bearer token (RFC 6750 b64token), without
// quoting it.
func checkToken(t string) error {
	for i := 0; i < len(t); i++ {
		c := t[i]
		ok := 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			strings.IndexByte("-._~+/=", c) >= 0
		if !ok {
			return fmt.Errorf("bigseg bearer token: character %d is not allowed in a bearer token", i+1)
		}
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
