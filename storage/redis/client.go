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
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of a client's timeouts and retries. go-redis's own (5 s to dial, 5 dial attempts,
// 3 s to read, 3 retries) would make a dead Redis look like a hang; a lookup's own timeout
// bounds whatever these add up to.
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

// ClientOptions say which Redis to read, and how. Exactly one of URL, ClusterAddrs and
// SentinelAddrs is set.
type ClientOptions struct {
	URL            string   // standalone: redis://, rediss:// or unix://
	ClusterAddrs   []string // Redis Cluster: seed host:port addresses
	SentinelAddrs  []string // Sentinel: the sentinels' host:port addresses
	SentinelMaster string

	// Username, Password and DB win over the URL's only where the URL is silent.
	Username, Password, SentinelPassword string
	DB                                   int
	// TLS is nil for plain connections. Its ServerName, when empty, is the host of the URL
	// (standalone) or of each address dialled.
	TLS *tls.Config

	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	MaxRetries                             int // retries of a failed call; 0 for none
	PoolSize                               int // connections per node; 0 for go-redis's 10 per CPU

	// TracerProvider, when set, makes a client span of every command and pipeline (go-redis's
	// redisotel), named by the commands alone: never their arguments, so never a key or AUTH's
	// password. Nil for none.
	TracerProvider trace.TracerProvider
}

// Topology is Standalone, Cluster or Sentinel, as the options set.
func (o ClientOptions) Topology() string {
	switch {
	case len(o.ClusterAddrs) > 0:
		return Cluster
	case len(o.SentinelAddrs) > 0:
		return Sentinel
	}
	return Standalone
}

// Addrs are the addresses the client starts from, for logs (never credentials).
func (o ClientOptions) Addrs() []string {
	switch o.Topology() {
	case Cluster:
		return o.ClusterAddrs
	case Sentinel:
		return o.SentinelAddrs
	}
	if u, err := goredis.ParseURL(o.URL); err == nil {
		return []string{u.Addr}
	}
	return nil
}

// CheckURL says what is wrong with a standalone URL, without its password.
func CheckURL(rawURL string) error {
	if !strings.Contains(rawURL, "://") {
		return fmt.Errorf("%q is not a URL: give redis://%s (or rediss:// for TLS, unix:// for a socket)", redact(rawURL), redact(rawURL))
	}
	if _, err := goredis.ParseURL(rawURL); err != nil {
		return redactedError(err, rawURL)
	}
	return nil
}

// NewClient makes the client the options describe; the caller closes it.
func NewClient(o ClientOptions) (goredis.UniversalClient, error) {
	u := &goredis.UniversalOptions{
		Username: o.Username, Password: o.Password, DB: o.DB, SentinelPassword: o.SentinelPassword,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		MaxRetries: o.MaxRetries, MinRetryBackoff: minRetryBackoff, MaxRetryBackoff: maxRetryBackoff,
		PoolSize: o.PoolSize, TLSConfig: o.TLS,
		// One dial attempt per connection: go-redis would otherwise retry a refused dial 5
		// times with backoffs, inside every lookup.
		DialerRetries: 1,
		// Socket deadlines follow a call's context too, not only the read and write timeouts:
		// so the lookup timeout bounds a read in progress, and a batch never succeeds late.
		ContextTimeoutEnabled: true,
		// RESP2: bigseg needs nothing of RESP3, and go-redis checks for RESP3 push
		// notifications around every read (7% of CPU in the cold benchmark).
		Protocol: 2,
	}
	if o.MaxRetries == 0 {
		u.MaxRetries = -1 // go-redis reads 0 as "its default, 3"; -1 is none
	}
	switch o.Topology() {
	case Cluster:
		u.Addrs, u.IsClusterMode = o.ClusterAddrs, true
	case Sentinel:
		u.Addrs, u.MasterName = o.SentinelAddrs, o.SentinelMaster
	default:
		if err := standalone(o, u); err != nil {
			return nil, err
		}
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

// standalone sets what the URL says where the options are silent.
func standalone(o ClientOptions, u *goredis.UniversalOptions) error {
	p, err := goredis.ParseURL(o.URL)
	if err != nil {
		return redactedError(err, o.URL)
	}
	u.Addrs = []string{p.Addr}
	if p.Username != "" {
		u.Username = p.Username
	}
	if p.Password != "" {
		u.Password = p.Password
	}
	if p.DB != 0 {
		u.DB = p.DB
	}
	if p.Network == "unix" {
		u.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: o.DialTimeout}
			return d.DialContext(ctx, "unix", addr)
		}
		return nil
	}
	if o.TLS != nil && o.TLS.ServerName == "" {
		host, _, err := net.SplitHostPort(p.Addr) // not a split on the first ':': IPv6
		if err != nil {
			return redactedError(err, o.URL)
		}
		u.TLSConfig = o.TLS.Clone()
		u.TLSConfig.ServerName = host
	}
	return nil
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
// has one logger per process: only main should call this.
func SetLogger(log *slog.Logger) { goredis.SetLogger(logger{log}) }

type logger struct{ log *slog.Logger }

func (l logger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}
