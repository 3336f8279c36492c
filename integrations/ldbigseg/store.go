package ldbigseg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
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
	environment   string // the environment asked about (StoreBuilder.Environment), or ""
	token         string
	client        *http.Client
	owned         *http.Transport // the transport of the store's own client; nil with HTTPClient
	timeout       time.Duration
	bounds        bounds
	maxBody       int64 // bounds.maxBody()

	ctx    context.Context // cancelled by Close, which interrupts requests in flight
	cancel context.CancelFunc

	mu       sync.RWMutex // guards closed against inflight.Add
	closed   bool
	inflight sync.WaitGroup
}

var _ subsystems.BigSegmentStore = (*Store)(nil)

func newStore(base *url.URL, environment, token string, client *http.Client, timeout time.Duration, b bounds) *Store {
	routes := base.String()
	if environment != "" {
		routes += "/environments/" + environment // path-safe: checkEnvironment
	}
	s := &Store{
		membershipURL: routes + "/memberships?contextHash=",
		statusURL:     routes + "/status",
		environment:   environment,
		token:         token,
		client:        client,
		timeout:       timeout,
		bounds:        b,
		maxBody:       b.maxBody(),
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
// GET /memberships?contextHash= (under /environments/{name}/ with Environment). No membership
// is an empty membership (the nil-map value of ldstoreimpl.NewBigSegmentMembershipFromSegmentRefs,
// as LaunchDarkly's own stores return); an answer that is not a usable one is an error, and so
// is one over the bounds (MaxRefs, MaxRefBytes), which is read only as far as the first ref
// over them (decodeLookup).
func (s *Store) GetMembership(contextHash string) (subsystems.BigSegmentMembership, error) {
	var body lookup
	a, err := s.get(opMembership, s.membershipURL+url.QueryEscape(contextHash), func(r io.Reader) (err error) {
		body, err = decodeLookup(r, s.bounds)
		return err
	})
	if err != nil {
		return nil, err
	}
	if a.code != http.StatusOK {
		httpErr := s.httpError(a)
		var e struct {
			Status string `json:"status"`
		}
		if a.code == http.StatusServiceUnavailable && json.Unmarshal(a.body, &e) == nil && e.Status == "STORE_ERROR" {
			return nil, fmt.Errorf("%s: %w: %w", opMembership, ErrStoreUnavailable, httpErr)
		}
		return nil, fmt.Errorf("%s: %w", opMembership, httpErr)
	}
	switch body.status {
	case "HEALTHY", "STALE": // STALE is a good answer: the SDK judges staleness itself
	case "STORE_ERROR":
		return nil, fmt.Errorf("%s: %w (the lookup's status is STORE_ERROR)", opMembership, ErrStoreUnavailable)
	default:
		return nil, s.badBody(opMembership, a, fmt.Errorf("unknown status %q", cleanMessage(body.status, s.token)))
	}
	if body.refs == nil {
		return nil, s.badBody(opMembership, a, errors.New("no memberships"))
	}
	if body.contextHash != "" && body.contextHash != contextHash {
		return nil, s.badBody(opMembership, a, errors.New("the answer is for another context hash"))
	}
	var included, excluded []string
	for ref, in := range body.refs {
		if in {
			included = append(included, ref)
		} else {
			excluded = append(excluded, ref)
		}
	}
	return ldstoreimpl.NewBigSegmentMembershipFromSegmentRefs(included, excluded), nil
}

// GetMetadata asks bigseg for its status: one GET /status (under /environments/{name}/ with
// Environment), which bigseg answers from its last poll of its store. lastSynchronizedOn is the
// SDK's LastUpToDate (0: never synchronized, which the SDK takes as stale); "available": false
// is an error, so the SDK reports the store as unavailable. Fields this version does not know
// are ignored. A bigseg serving several environments answers the unscoped /status with every
// environment's: an error that says to set Environment.
func (s *Store) GetMetadata() (subsystems.BigSegmentStoreMetadata, error) {
	var none subsystems.BigSegmentStoreMetadata
	a, err := s.get(opStatus, s.statusURL, nil)
	if err != nil {
		return none, err
	}
	if a.code != http.StatusOK {
		return none, fmt.Errorf("%s: %w", opStatus, s.httpError(a))
	}
	var body struct {
		Available          *bool                      `json:"available"`
		LastSynchronizedOn *int64                     `json:"lastSynchronizedOn"`
		CheckedAt          *json.RawMessage           `json:"checkedAt"`
		Environment        *string                    `json:"environment"`
		Environments       map[string]json.RawMessage `json:"environments"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		return none, s.badBody(opStatus, a, err)
	}
	switch {
	case body.Available == nil && body.Environments != nil:
		names := slices.Sorted(maps.Keys(body.Environments))
		return none, fmt.Errorf("%s: bigseg serves several environments (%s): set the store's Environment to one of them",
			opStatus, cleanMessage(strings.Join(names, ", "), s.token))
	case s.environment != "" && body.Environment != nil && *body.Environment != s.environment:
		return none, s.badBody(opStatus, a, fmt.Errorf("the answer is for environment %q, not %q",
			cleanMessage(*body.Environment, s.token), s.environment))
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

// answer is a response: its body read in full, unless a decoder read it.
type answer struct {
	code   int
	header http.Header
	body   []byte
	read   int64 // the bytes of the body read
}

// get sends one GET and reads the answer, bounded in time by the store's timeout and in size
// by maxBody: the body of a 200 with decode, if not nil, as it arrives; any other whole, into
// answer.body. Any status code is an answer; failing to get one or to read it is an error, and
// so is a body that decode finds unusable.
func (s *Store) get(op, target string, decode func(io.Reader) error) (*answer, error) {
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
	// Closing a body not read to its end closes the connection: nothing more is read.
	defer resp.Body.Close()
	a := &answer{code: resp.StatusCode, header: resp.Header}
	if resp.ContentLength > s.maxBody {
		return nil, fmt.Errorf("%s: HTTP %d: %w", op, a.code,
			&overBound{fmt.Sprintf("%d bytes, more than the %d bytes this store reads", resp.ContentLength, s.maxBody)})
	}
	body := &limitedBody{r: resp.Body, max: s.maxBody}
	if decode != nil && a.code == http.StatusOK {
		err = decode(body)
	} else {
		a.body, err = io.ReadAll(body)
	}
	a.read = body.n
	switch {
	case err == nil:
		return a, nil
	case errors.Is(err, ErrAnswerTooLarge):
		return nil, fmt.Errorf("%s: HTTP %d: %w", op, a.code, err)
	case body.err != nil:
		return nil, s.requestError(op, fmt.Errorf("HTTP %d: reading the answer: %w", a.code, body.err))
	default:
		return nil, s.badBody(op, a, err)
	}
}

// limitedBody reads a response body, failing past max bytes (keeping none of them), and
// remembers the error of its reader, which is the transport's.
type limitedBody struct {
	r   io.Reader
	n   int64 // bytes read
	max int64
	err error // the reader's error other than io.EOF
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.n <= b.max {
		if rest := b.max + 1 - b.n; int64(len(p)) > rest {
			p = p[:rest]
		}
		n, err := b.r.Read(p)
		b.n += int64(n)
		if b.n <= b.max {
			if err != nil && err != io.EOF {
				b.err = err
			}
			return n, err
		}
	}
	return 0, &overBound{fmt.Sprintf("more than the %d bytes this store reads", b.max)}
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
	e := &HTTPError{StatusCode: a.code, RetryAfter: cleanMessage(a.header.Get("Retry-After"), s.token), environment: s.environment}
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
	return fmt.Errorf("%s: HTTP %d: the answer is not bigseg's (Content-Type %q, %d bytes read): %s",
		op, a.code, ct, a.read, cleanMessage(err.Error(), s.token))
}
