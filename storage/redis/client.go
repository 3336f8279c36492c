package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of a client's timeouts and retries, where its URL names none. go-redis's own (5 s
// to dial, 5 dial attempts, 3 s to read, 3 retries) would make a dead Redis look like a hang;
// a lookup's own timeout bounds whatever these add up to.
const (
	DefaultDialTimeout  = time.Second
	DefaultReadTimeout  = 500 * time.Millisecond
	DefaultWriteTimeout = 500 * time.Millisecond
	DefaultMaxRetries   = 1
)

// Retry backoff between a failed call and its retry: short, since the lookup timeout bounds
// the whole lookup anyway.
const (
	minRetryBackoff = 8 * time.Millisecond
	maxRetryBackoff = 100 * time.Millisecond
)

// Topologies, as ClientOptions.Topology names them.
const (
	Standalone = "standalone"
	Cluster    = "cluster"
	Sentinel   = "sentinel"
)

// ClientOptions say which Redis to read, and how. Exactly one of URL, ClusterURL and
// SentinelURL is set, each in go-redis's syntax for its topology (ParseURL, ParseClusterURL,
// ParseFailoverURL): the URL names the user, password, database, TLS (rediss://) and its
// skip_verify, and go-redis's options as parameters (dial_timeout, read_timeout,
// write_timeout, max_retries, pool_size, ...). Where it names no timeout or retries, the
// defaults above apply.
type ClientOptions struct {
	URL         string // standalone: redis://, rediss:// or unix://
	ClusterURL  string // Redis Cluster: redis://seed:6379?addr=seed2:6379&addr=...
	SentinelURL string // Sentinel: redis://sentinel:26379?addr=...&master_name=mymaster

	// Password (of the user the URL names; with Sentinel, the master's) and SentinelPassword
	// (the sentinels' own), as read from files; each only where the URL has none.
	Password, SentinelPassword string
	// TLS, when the URL is rediss://, gives its CA (RootCAs), client certificate and server
	// name. An empty ServerName is each address dialled.
	TLS *tls.Config

	// TracerProvider, when set, makes a client span of every command and pipeline (go-redis's
	// redisotel), named by the commands alone: never their arguments, so never a key or AUTH's
	// password. Nil for none.
	TracerProvider trace.TracerProvider
}

// Topology is Standalone, Cluster or Sentinel, as the options set.
func (o ClientOptions) Topology() string {
	switch {
	case o.ClusterURL != "":
		return Cluster
	case o.SentinelURL != "":
		return Sentinel
	}
	return Standalone
}

// rawURL is the URL of the topology set.
func (o ClientOptions) rawURL() string {
	return o.URL + o.ClusterURL + o.SentinelURL
}

// Addrs are the addresses the client starts from, for logs (never credentials).
func (o ClientOptions) Addrs() []string {
	u, err := o.parse()
	if err != nil {
		return nil
	}
	return u.Addrs
}

// CheckURL says what is wrong with the options' URL, without its password.
func (o ClientOptions) CheckURL() error {
	raw := o.rawURL()
	if !strings.Contains(raw, "://") {
		return fmt.Errorf("%q is not a URL: give redis://%s (or rediss:// for TLS)", redact(raw), redact(raw))
	}
	u, err := o.parse()
	if err != nil {
		return err
	}
	for name, d := range map[string]time.Duration{"dial_timeout": u.DialTimeout, "read_timeout": u.ReadTimeout, "write_timeout": u.WriteTimeout} {
		if d < 0 {
			return fmt.Errorf("%s: must be positive (every call to Redis is bounded)", name)
		}
	}
	return nil
}

// CheckURL says what is wrong with a standalone URL, without its password.
func CheckURL(rawURL string) error { return ClientOptions{URL: rawURL}.CheckURL() }

// URLCredentials says whether the options' URL names a password: of the user (with Sentinel,
// the master's password= parameter) and of the sentinels (a Sentinel URL's own).
func (o ClientOptions) URLCredentials() (password, sentinelPassword bool) {
	u, err := o.parse()
	if err != nil {
		return false, false
	}
	return u.Password != "", u.SentinelPassword != ""
}

// parse reads the URL of the topology set into go-redis's universal options.
func (o ClientOptions) parse() (*goredis.UniversalOptions, error) {
	raw := o.rawURL()
	var u *goredis.UniversalOptions
	switch o.Topology() {
	case Cluster:
		c, err := goredis.ParseClusterURL(raw)
		if err != nil {
			return nil, redactedError(err, raw)
		}
		u = &goredis.UniversalOptions{Addrs: c.Addrs, IsClusterMode: true, Username: c.Username, Password: c.Password,
			DialTimeout: c.DialTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout, MaxRetries: c.MaxRetries,
			MinRetryBackoff: c.MinRetryBackoff, MaxRetryBackoff: c.MaxRetryBackoff, PoolSize: c.PoolSize,
			PoolTimeout: c.PoolTimeout, MinIdleConns: c.MinIdleConns, MaxIdleConns: c.MaxIdleConns,
			MaxActiveConns: c.MaxActiveConns, ConnMaxIdleTime: c.ConnMaxIdleTime, ConnMaxLifetime: c.ConnMaxLifetime,
			ClientName: c.ClientName, Protocol: c.Protocol, MaxRedirects: c.MaxRedirects, TLSConfig: c.TLSConfig}
	case Sentinel:
		f, err := goredis.ParseFailoverURL(raw)
		if err != nil {
			return nil, redactedError(err, raw)
		}
		if f.MasterName == "" {
			return nil, errors.New("a Sentinel URL names its master: add master_name=<name>")
		}
		u = &goredis.UniversalOptions{Addrs: f.SentinelAddrs, MasterName: f.MasterName, SentinelUsername: f.SentinelUsername,
			SentinelPassword: f.SentinelPassword, Username: f.Username, Password: f.Password, DB: f.DB,
			DialTimeout: f.DialTimeout, ReadTimeout: f.ReadTimeout, WriteTimeout: f.WriteTimeout, MaxRetries: f.MaxRetries,
			MinRetryBackoff: f.MinRetryBackoff, MaxRetryBackoff: f.MaxRetryBackoff, PoolSize: f.PoolSize,
			PoolTimeout: f.PoolTimeout, MinIdleConns: f.MinIdleConns, MaxIdleConns: f.MaxIdleConns,
			MaxActiveConns: f.MaxActiveConns, ConnMaxIdleTime: f.ConnMaxIdleTime, ConnMaxLifetime: f.ConnMaxLifetime,
			ClientName: f.ClientName, Protocol: f.Protocol, TLSConfig: f.TLSConfig}
	default:
		p, err := goredis.ParseURL(raw)
		if err != nil {
			return nil, redactedError(err, raw)
		}
		u = &goredis.UniversalOptions{Addrs: []string{p.Addr}, Username: p.Username, Password: p.Password, DB: p.DB,
			DialTimeout: p.DialTimeout, ReadTimeout: p.ReadTimeout, WriteTimeout: p.WriteTimeout, MaxRetries: p.MaxRetries,
			MinRetryBackoff: p.MinRetryBackoff, MaxRetryBackoff: p.MaxRetryBackoff, PoolSize: p.PoolSize,
			PoolTimeout: p.PoolTimeout, MinIdleConns: p.MinIdleConns, MaxIdleConns: p.MaxIdleConns,
			MaxActiveConns: p.MaxActiveConns, ConnMaxIdleTime: p.ConnMaxIdleTime, ConnMaxLifetime: p.ConnMaxLifetime,
			ClientName: p.ClientName, Protocol: p.Protocol, TLSConfig: p.TLSConfig}
		if p.Network == "unix" {
			u.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) {
				d := net.Dialer{Timeout: u.DialTimeout}
				return d.DialContext(ctx, "unix", addr)
			}
		}
	}
	return u, nil
}

// NewClient makes the client the options describe; the caller closes it.
func NewClient(o ClientOptions) (goredis.UniversalClient, error) {
	if err := o.CheckURL(); err != nil {
		return nil, err
	}
	u, _ := o.parse()
	defaults := []struct {
		v *time.Duration
		d time.Duration
	}{{&u.DialTimeout, DefaultDialTimeout}, {&u.ReadTimeout, DefaultReadTimeout}, {&u.WriteTimeout, DefaultWriteTimeout},
		{&u.MinRetryBackoff, minRetryBackoff}, {&u.MaxRetryBackoff, maxRetryBackoff}}
	for _, d := range defaults {
		if *d.v == 0 {
			*d.v = d.d
		}
	}
	if u.MaxRetries == 0 { // unset (go-redis's own spelling of none is -1)
		u.MaxRetries = DefaultMaxRetries
	}
	if u.Password == "" {
		u.Password = o.Password
	}
	if u.SentinelPassword == "" {
		u.SentinelPassword = o.SentinelPassword
	}
	// One dial attempt per connection: go-redis would otherwise retry a refused dial 5 times
	// with backoffs, inside every lookup.
	u.DialerRetries = 1
	// Socket deadlines follow a call's context too, not only the read and write timeouts: so
	// the lookup timeout bounds a read in progress, and a batch never succeeds late.
	u.ContextTimeoutEnabled = true
	// RESP2 unless the URL says otherwise: bigseg needs nothing of RESP3, and go-redis checks
	// for RESP3 push notifications around every read (7% of CPU in the cold benchmark).
	if u.Protocol == 0 {
		u.Protocol = 2
	}
	if u.TLSConfig != nil && o.TLS != nil {
		tc := u.TLSConfig.Clone()
		tc.RootCAs, tc.Certificates = o.TLS.RootCAs, o.TLS.Certificates
		if o.TLS.ServerName != "" {
			tc.ServerName = o.TLS.ServerName
		}
		u.TLSConfig = tc
	}
	if u.TLSConfig != nil && o.Topology() != Standalone && (o.TLS == nil || o.TLS.ServerName == "") {
		u.TLSConfig.ServerName = "" // each node, each sentinel, is verified against its own name
	}
	if u.TLSConfig != nil {
		u.TLSConfig.MinVersion = tls.VersionTLS12
	}
	c := goredis.NewUniversalClient(u)
	if o.TracerProvider != nil {
		if err := redisotel.InstrumentTracing(c, redisotel.WithTracerProvider(o.TracerProvider),
			redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false)); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// redactedError keeps a URL's password out of an error that may quote the URL: a url.Error
// it wraps (made by the parse that failed, so ours to change) names the URL redacted, and the
// message is told without the URL as given or as Go quotes it (with "%q", escaping a password
// that holds a quote, a backslash or a control character).
func redactedError(err error, rawURL string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redact(ue.URL)
	}
	msg, quoted := err.Error(), strconv.Quote(rawURL)
	msg = strings.ReplaceAll(msg, rawURL, redact(rawURL))
	msg = strings.ReplaceAll(msg, quoted[1:len(quoted)-1], redact(quoted[1:len(quoted)-1]))
	return redacted{err: err, msg: msg}
}

// redacted is an error told without a URL's password: errors.Is and errors.As still see the
// error it wraps.
type redacted struct {
	err error
	msg string
}

func (e redacted) Error() string { return e.msg }
func (e redacted) Unwrap() error { return e.err }

// redact is rawURL with the user information replaced, with or without a scheme.
func redact(rawURL string) string {
	start := 0
	if i := strings.Index(rawURL, "://"); i >= 0 {
		start = i + 3
	}
	if at := strings.LastIndex(rawURL, "@"); at >= start {
		return rawURL[:start] + "xxxxx" + rawURL[at:]
	}
	return rawURL
}

// SetLogger sends go-redis's own log lines (reconnection attempts and the like) to log, at
// debug level, since failures reach operators through lookups, polls and metrics. go-redis
// has one logger per process (goredis.SetLogger), not one per client, so this cannot be an
// option of a client: cmd/server's run calls it with its logger, and when several runs share
// a process (tests), the last call's logger gets every client's lines. Until it is called,
// or after SetLogger(nil), go-redis's lines are dropped.
func SetLogger(log *slog.Logger) { goredisLog.Store(log) }

// goredisLog is SetLogger's logger: the one package-level logger, because go-redis's is.
var goredisLog atomic.Pointer[slog.Logger]

// init installs the forwarder as go-redis's logger once, before any client exists, so that
// SetLogger never writes go-redis's variable while another run's clients read it.
func init() { goredis.SetLogger(logger{}) }

// logger forwards go-redis's lines to goredisLog.
type logger struct{}

func (logger) Printf(ctx context.Context, format string, v ...any) {
	if log := goredisLog.Load(); log != nil {
		log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
	}
}
