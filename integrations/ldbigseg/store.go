package ldbigseg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/launchdarkly/go-sdk-common/v3/ldtime"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems"
	"github.com/launchdarkly/go-server-sdk/v7/subsystems/ldstoreimpl"
)

// The prefixes of the store's errors, which the SDK logs as they are.
const (
	opMembership = "bigseg membership"
	opStatus     = "bigseg status"
)

// userAgent names the adapter in bigseg's access log and in proxies.
const userAgent = "ldbigseg-go"

// Store is a Big Segment store that reads bigseg over HTTP. The SDK makes it with the
// StoreBuilder and calls it from many goroutines at once; it is safe for that.
type Store struct {
	membershipURL string // ".../memberships?contextHash=": the escaped hash is appended
	statusURL     string
	token         string
	client        *http.Client
	owned         *http.Transport // the transport of the store's own client; nil with HTTPClient
	timeout       time.Duration

	ctx    context.Context // cancelled by Close, which interrupts requests in flight
	cancel context.CancelFunc

	mu       sync.RWMutex // guards closed against inflight.Add
	closed   bool
	inflight sync.WaitGroup
}

var _ subsystems.BigSegmentStore = (*Store)(nil)

func newStore(base *url.URL, token string, client *http.Client, timeout time.Duration) *Store {
	s := &Store{
		membershipURL: base.String() + "/memberships?contextHash=",
		statusURL:     base.String() + "/status",
		token:         token,
		client:        client,
		timeout:       timeout,
	}
	if s.client == nil {
		s.owned = newTransport()
		s.client = &http.Client{
			Transport: s.owned,
			// bigseg never redirects: a redirect means a wrong base URL, and following it
			// could carry the bearer token elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// newTransport is Go's default transport with room for idle connections: the SDK calls the
// store from every goroutine that evaluates a flag for an uncached context, and Go's default
// of 2 idle connections per host would make concurrent misses open and close connections
// continually. Idle connections are closed after 90 s, before bigseg's 2 min idle timeout, so
// the client is the side that closes them.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 128
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return t
}

// GetMembership asks bigseg for the memberships of one context hash: one
// GET /memberships?contextHash=. No membership is an empty membership (the nil-map value of
// ldstoreimpl.NewBigSegmentMembershipFromSegmentRefs, as LaunchDarkly's own stores return);
// an answer that is not a usable one is an error.
func (s *Store) GetMembership(contextHash string) (subsystems.BigSegmentMembership, error) {
	a, err := s.get(opMembership, s.membershipURL+url.QueryEscape(contextHash))
	if err != nil {
		return nil, err
	}
	var body struct {
		ContextHash string          `json:"contextHash"`
		Memberships map[string]bool `json:"memberships"`
		Status      string          `json:"status"`
		Error       string          `json:"error"`
	}
	if a.code != http.StatusOK {
		httpErr := s.httpError(a)
		if a.code == http.StatusServiceUnavailable && json.Unmarshal(a.body, &body) == nil && body.Status == "STORE_ERROR" {
			return nil, fmt.Errorf("%s: %w: %w", opMembership, ErrStoreUnavailable, httpErr)
		}
		return nil, fmt.Errorf("%s: %w", opMembership, httpErr)
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		return nil, s.badBody(opMembership, a, err)
	}
	switch body.Status {
	case "HEALTHY", "STALE": // STALE is a good answer: the SDK judges staleness itself
	case "STORE_ERROR":
		return nil, fmt.Errorf("%s: %w (the lookup's status is STORE_ERROR)", opMembership, ErrStoreUnavailable)
	default:
		return nil, s.badBody(opMembership, a, fmt.Errorf("unknown status %q", cleanMessage(body.Status, s.token)))
	}
	if body.Memberships == nil {
		return nil, s.badBody(opMembership, a, errors.New("no memberships"))
	}
	if body.ContextHash != "" && body.ContextHash != contextHash {
		return nil, s.badBody(opMembership, a, errors.New("the answer is for another context hash"))
	}
	var included, excluded []string
	for ref, in := range body.Memberships {
		if in {
			included = append(included, ref)
		} else {
			excluded = append(excluded, ref)
		}
	}
	return ldstoreimpl.NewBigSegmentMembershipFromSegmentRefs(included, excluded), nil
}

// GetMetadata asks bigseg for its status: one GET /status, which bigseg answers from its last
// poll of its store. lastSynchronizedOn is the SDK's LastUpToDate (0: never synchronized, which
// the SDK takes as stale); "available": false is an error, so the SDK reports the store as
// unavailable. Fields this version does not know are ignored.
func (s *Store) GetMetadata() (subsystems.BigSegmentStoreMetadata, error) {
	var none subsystems.BigSegmentStoreMetadata
	a, err := s.get(opStatus, s.statusURL)
	if err != nil {
		return none, err
	}
	if a.code != http.StatusOK {
		return none, fmt.Errorf("%s: %w", opStatus, s.httpError(a))
	}
	var body struct {
		Available          *bool            `json:"available"`
		LastSynchronizedOn *int64           `json:"lastSynchronizedOn"`
		CheckedAt          *json.RawMessage `json:"checkedAt"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		return none, s.badBody(opStatus, a, err)
	}
	switch {
	case body.Available == nil:
		return none, s.badBody(opStatus, a, errors.New(`no "available"`))
	case !*body.Available && (body.CheckedAt == nil || string(*body.CheckedAt) == "null"):
		return none, fmt.Errorf("%s: %w (bigseg has not polled it yet)", opStatus, ErrStoreUnavailable)
	case !*body.Available:
		return none, fmt.Errorf("%s: %w (bigseg's last status poll could not read it)", opStatus, ErrStoreUnavailable)
	case body.LastSynchronizedOn == nil:
		return none, s.badBody(opStatus, a, errors.New(`no "lastSynchronizedOn"`))
	case *body.LastSynchronizedOn < 0:
		return none, s.badBody(opStatus, a, errors.New(`negative "lastSynchronizedOn"`))
	}
	return subsystems.BigSegmentStoreMetadata{LastUpToDate: ldtime.UnixMillisecondTime(*body.LastSynchronizedOn)}, nil
}

// Close interrupts requests in flight, waits for them to end, and closes the idle connections
// of the store's own transport (not those of a client given with HTTPClient). Calls after
// Close fail with ErrClosed. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return nil
	}
	s.cancel()
	s.inflight.Wait()
	if s.owned != nil {
		s.owned.CloseIdleConnections()
	}
	return nil
}

// answer is a response read in full.
type answer struct {
	code   int
	header http.Header
	body   []byte
}

// get sends one GET and reads the whole answer, bounded in time by the store's timeout and in
// size by MaxResponseBytes. Any status code is an answer; only failing to get one is an error.
func (s *Store) get(op, target string) (*answer, error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	s.inflight.Add(1)
	s.mu.RUnlock()
	defer s.inflight.Done()

	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, s.requestError(op, err)
	}
	defer resp.Body.Close()
	if resp.ContentLength > MaxResponseBytes {
		return nil, fmt.Errorf("%s: HTTP %d: the answer is %d bytes, more than the %d this store reads",
			op, resp.StatusCode, resp.ContentLength, MaxResponseBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, s.requestError(op, fmt.Errorf("HTTP %d: reading the answer: %w", resp.StatusCode, err))
	}
	if len(body) > MaxResponseBytes {
		// Closing the body unread closes the connection: nothing more is read.
		return nil, fmt.Errorf("%s: HTTP %d: the answer is more than the %d bytes this store reads",
			op, resp.StatusCode, MaxResponseBytes)
	}
	return &answer{code: resp.StatusCode, header: resp.Header, body: body}, nil
}

// requestError says why no answer came: Close, the timeout, or the transport.
func (s *Store) requestError(op string, err error) error {
	switch {
	case s.ctx.Err() != nil:
		return fmt.Errorf("%s: %w: %w", op, ErrClosed, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: no answer within %v: %w", op, s.timeout, err)
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
}

// httpError describes an answer whose status code is not 200.
func (s *Store) httpError(a *answer) *HTTPError {
	e := &HTTPError{StatusCode: a.code, RetryAfter: cleanMessage(a.header.Get("Retry-After"), s.token)}
	var body struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(a.body, &body) == nil && body.Error != "" {
		e.Message = cleanMessage(body.Error, s.token)
	} else if mt, _, _ := mime.ParseMediaType(a.header.Get("Content-Type")); strings.HasPrefix(mt, "text/") {
		e.Message = cleanMessage(string(a.body), s.token)
	}
	return e
}

// badBody describes a 200 whose body is not bigseg's JSON, without quoting the body.
func (s *Store) badBody(op string, a *answer, err error) error {
	// The error is made into text and cleaned: a decoding error can quote the body (a map
	// key, say), which a hostile server could fill with the token.
	ct := cleanMessage(a.header.Get("Content-Type"), s.token)
	return fmt.Errorf("%s: HTTP %d: the answer is not bigseg's (Content-Type %q, %d bytes): %s",
		op, a.code, ct, len(a.body), cleanMessage(err.Error(), s.token))
}
