package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/bigseg/bigseg/internal/guard"
)

const envPrefix = "BIGSEG"

// config is every setting of the server, read from BIGSEG_* environment variables. The struct
// tags are envconfig's: envconfig lists them for -h, and loadConfig reads them through a
// getenv function (envconfig itself only reads the process environment), so that tests can
// run programs with different environments side by side.
type config struct {
	Addr                       string        `envconfig:"ADDR" default:":8080" desc:"address to listen on"`
	TLSCertFile                string        `envconfig:"TLS_CERT_FILE" desc:"PEM certificate (chain) to serve HTTPS with on ADDR; re-read when it changes on disk"`
	TLSKeyFile                 string        `envconfig:"TLS_KEY_FILE" desc:"PEM key of TLS_CERT_FILE"`
	TLSClientCAFile            string        `envconfig:"TLS_CLIENT_CA_FILE" desc:"PEM CA bundle: with it, clients must present a certificate it issued (mutual TLS)"`
	RedisURL                   string        `envconfig:"REDIS_URL" desc:"standalone Redis: redis://, rediss:// (TLS) or unix:// URL; with no Redis setting at all, the embedded store is used"`
	RedisClusterAddrs          []string      `envconfig:"REDIS_CLUSTER_ADDRS" desc:"Redis Cluster: comma-separated seed host:port addresses"`
	RedisSentinelAddrs         []string      `envconfig:"REDIS_SENTINEL_ADDRS" desc:"Sentinel-managed Redis: comma-separated sentinel host:port addresses"`
	RedisSentinelMaster        string        `envconfig:"REDIS_SENTINEL_MASTER" desc:"Sentinel-managed Redis: the master's name"`
	RedisSentinelPassword      string        `envconfig:"REDIS_SENTINEL_PASSWORD" desc:"password of the sentinels themselves, if they require one"`
	RedisSentinelPasswordFile  string        `envconfig:"REDIS_SENTINEL_PASSWORD_FILE" desc:"file holding the sentinels' password, such as a mounted Kubernetes secret"`
	RedisDB                    int           `envconfig:"REDIS_DB" default:"0" desc:"database number (standalone and Sentinel; a URL's own /db wins)"`
	RedisUsername              string        `envconfig:"REDIS_USERNAME" desc:"ACL user name (or in the URL)"`
	RedisPassword              string        `envconfig:"REDIS_PASSWORD" desc:"password (or in the URL, or BIGSEG_REDIS_PASSWORD_FILE)"`
	RedisPasswordFile          string        `envconfig:"REDIS_PASSWORD_FILE" desc:"file holding the password, such as a mounted Kubernetes secret"`
	RedisTLS                   bool          `envconfig:"REDIS_TLS" default:"false" desc:"use TLS (implied by rediss://)"`
	RedisTLSCAFile             string        `envconfig:"REDIS_TLS_CA_FILE" desc:"PEM CA bundle to verify Redis with, instead of the system roots"`
	RedisTLSCertFile           string        `envconfig:"REDIS_TLS_CERT_FILE" desc:"PEM client certificate, for Redis servers that require one"`
	RedisTLSKeyFile            string        `envconfig:"REDIS_TLS_KEY_FILE" desc:"PEM key of the client certificate"`
	RedisTLSServerName         string        `envconfig:"REDIS_TLS_SERVER_NAME" desc:"name to verify the server certificate against, if not the host dialled"`
	RedisTLSInsecureSkipVerify bool          `envconfig:"REDIS_TLS_INSECURE_SKIP_VERIFY" default:"false" desc:"do not verify the server certificate (testing only)"`
	RedisDialTimeout           time.Duration `envconfig:"REDIS_DIAL_TIMEOUT" default:"1s" desc:"how long connecting to Redis may take"`
	RedisReadTimeout           time.Duration `envconfig:"REDIS_READ_TIMEOUT" default:"500ms" desc:"how long a Redis reply may take"`
	RedisWriteTimeout          time.Duration `envconfig:"REDIS_WRITE_TIMEOUT" default:"500ms" desc:"how long sending a Redis command may take"`
	RedisMaxRetries            int           `envconfig:"REDIS_MAX_RETRIES" default:"1" desc:"retries of a failed Redis call (a broken pooled connection, a timeout); 0 for none"`
	RedisPoolSize              int           `envconfig:"REDIS_POOL_SIZE" default:"0" desc:"most connections per Redis node; 0 means 10 per CPU"`
	Prefix                     string        `envconfig:"PREFIX" default:"launchdarkly" desc:"key prefix of the Big Segments data in Redis"`
	SeedFile                   string        `envconfig:"SEED_FILE" desc:"fixture file for the embedded store (see README); unset means an empty store"`
	CacheSize                  int           `envconfig:"CACHE_SIZE" default:"100000" desc:"most memberships cached; 0 turns the cache off"`
	CacheTTL                   time.Duration `envconfig:"CACHE_TTL" default:"5s" desc:"how long a membership is cached while the store has no cursor; 0 turns the cache off"`
	CacheTTLWithCursor         time.Duration `envconfig:"CACHE_TTL_WITH_CURSOR" default:"1h" desc:"how long a membership is cached while the store has a cursor (a new cursor drops every cached membership)"`
	StatusPollInterval         time.Duration `envconfig:"STATUS_POLL_INTERVAL" default:"5s" desc:"how often the store's status is polled (at most STALE_AFTER)"`
	StaleAfter                 time.Duration `envconfig:"STALE_AFTER" default:"2m" desc:"age of the last synchronization from which data counts as stale"`
	LookupTimeout              time.Duration `envconfig:"LOOKUP_TIMEOUT" default:"1s" desc:"longest a lookup (or batch) may wait for the store before it answers STORE_ERROR"`
	StoreReadsInFlight         int           `envconfig:"STORE_READS_IN_FLIGHT" default:"4" desc:"most store reads at once; cache misses arriving meanwhile are read together, in one pipeline"`
	MaxKeyBytes                int           `envconfig:"MAX_KEY_BYTES" default:"1024" desc:"longest context key accepted, in bytes"`
	MaxBatch                   int           `envconfig:"MAX_BATCH" default:"1000" desc:"most lookups in one POST /memberships"`
	MaxBatchRefs               int           `envconfig:"MAX_BATCH_REFS" default:"100000" desc:"most segment refs in one POST /memberships answer (400 beyond)"`
	MaxBodyBytes               int64         `envconfig:"MAX_BODY_BYTES" default:"1048576" desc:"largest request body accepted, in bytes"`
	BodyReadTimeout            time.Duration `envconfig:"BODY_READ_TIMEOUT" default:"2s" desc:"how long a client may take to send a request body (408 beyond)"`
	BodyMemoryBytes            int64         `envconfig:"BODY_MEMORY_BYTES" default:"67108864" desc:"memory for the batch bodies being read or answered at once (at least MAX_BODY_BYTES); when it is spent, the oldest body still arriving is cut off (408) and new ones wait, then get 429"`
	PprofAddr                  string        `envconfig:"PPROF_ADDR" desc:"address to serve Go's /debug/pprof on, such as 127.0.0.1:6060; unset means off"`
	LogLevel                   string        `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	APITokens                  []string      `envconfig:"API_TOKENS" desc:"comma-separated bearer tokens; when set (or the file), every /memberships route and /status/stream require one"`
	APITokensFile              string        `envconfig:"API_TOKENS_FILE" desc:"file of bearer tokens, one per line (# comments and blank lines ignored); re-read when it changes, and on SIGHUP"`
	MetricsAddr                string        `envconfig:"METRICS_ADDR" desc:"serve /metrics (and the probes /livez, /healthz, /readyz) on this address too, such as :9090; /metrics is then not on ADDR"`
	MetricsTLS                 bool          `envconfig:"METRICS_TLS" default:"false" desc:"serve METRICS_ADDR with the TLS settings of ADDR (client certificates included); else plain HTTP"`
	MaxInflight                int           `envconfig:"MAX_INFLIGHT" default:"1024" desc:"most lookup requests running at once; as many more wait up to SHED_WAIT, the rest get 429; 0 turns shedding off"`
	ShedWait                   time.Duration `envconfig:"SHED_WAIT" default:"250ms" desc:"how long a lookup request may wait for a slot before a 429"`
	MaxConns                   int           `envconfig:"MAX_CONNS" default:"4096" desc:"most client connections open at once; at the limit a silent, idle or stuck one is closed to make room"`
	MaxStreams                 int           `envconfig:"MAX_STREAMS" default:"1000" desc:"most /status/stream connections open at once (503 beyond); at most half of BIGSEG_MAX_CONNS"`
	AccessLog                  bool          `envconfig:"ACCESS_LOG" default:"false" desc:"log every request (method, route pattern, code, duration; never the path)"`
	ReadHeaderTimeout          time.Duration `envconfig:"READ_HEADER_TIMEOUT" default:"5s" desc:"how long a client may take to send request headers"`
	ReadTimeout                time.Duration `envconfig:"READ_TIMEOUT" default:"15s" desc:"how long a client may take to send a whole request"`
	WriteTimeout               time.Duration `envconfig:"WRITE_TIMEOUT" default:"15s" desc:"how long writing a response may take (status streams excepted)"`
	IdleTimeout                time.Duration `envconfig:"IDLE_TIMEOUT" default:"2m" desc:"how long an idle keep-alive connection stays open"`
	MaxHeaderBytes             int           `envconfig:"MAX_HEADER_BYTES" default:"16384" desc:"largest request header accepted (431 beyond)"`
	ReadyRequiresFresh         bool          `envconfig:"READY_REQUIRES_FRESH" default:"false" desc:"make /readyz fail while the data is stale, not only while the store is unavailable"`
	ShutdownDelay              time.Duration `envconfig:"SHUTDOWN_DELAY" default:"5s" desc:"on SIGTERM, how long /readyz answers 503 while requests are still served, so load balancers notice (a second signal ends it)"`
	ShutdownTimeout            time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"10s" desc:"after the delay, how long in-flight requests get to finish"`
}

// loadConfig reads the configuration through getenv and checks it. An empty variable counts
// as unset. Every error names the variable at fault.
func loadConfig(getenv func(string) string) (config, error) {
	var cfg config
	v := reflect.ValueOf(&cfg).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name := envPrefix + "_" + f.Tag.Get("envconfig")
		s := getenv(name)
		if s == "" {
			s = f.Tag.Get("default")
		}
		if s == "" {
			continue
		}
		if err := setField(v.Field(i), s); err != nil {
			return cfg, fmt.Errorf("%s=%q: not a valid %s", name, s, f.Type)
		}
	}
	return cfg, cfg.validate()
}

// setField parses s into one of config's field types.
func setField(f reflect.Value, s string) error {
	var err error
	switch p := f.Addr().Interface().(type) {
	case *string:
		*p = s
	case *bool:
		*p, err = strconv.ParseBool(s)
	case *int:
		*p, err = strconv.Atoi(s)
	case *int64:
		*p, err = strconv.ParseInt(s, 10, 64)
	case *time.Duration:
		*p, err = time.ParseDuration(s)
	case *[]string:
		*p = strings.Split(s, ",")
	default:
		panic(fmt.Sprintf("config: no parser for %s", f.Type()))
	}
	return err
}

// validate checks every setting at once; Redis's are checked by validateRedis.
func (c config) validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s_%s: %s", envPrefix, name, fmt.Sprintf(format, args...)))
	}
	type check struct {
		name string
		bad  bool
		msg  string
	}
	for _, ck := range []check{
		{"CACHE_SIZE", c.CacheSize < 0, "must not be negative"},
		{"CACHE_TTL", c.CacheTTL < 0, "must not be negative"},
		{"CACHE_TTL_WITH_CURSOR", c.CacheTTLWithCursor <= 0, "must be positive"},
		{"STATUS_POLL_INTERVAL", c.StatusPollInterval <= 0, "must be positive"},
		{"STALE_AFTER", c.StaleAfter <= 0, "must be positive"},
		{"LOOKUP_TIMEOUT", c.LookupTimeout <= 0, "must be positive"},
		{"REDIS_DIAL_TIMEOUT", c.RedisDialTimeout <= 0, "must be positive"},
		{"REDIS_READ_TIMEOUT", c.RedisReadTimeout <= 0, "must be positive"},
		{"REDIS_WRITE_TIMEOUT", c.RedisWriteTimeout <= 0, "must be positive"},
		{"REDIS_MAX_RETRIES", c.RedisMaxRetries < 0, "must not be negative"},
		{"REDIS_POOL_SIZE", c.RedisPoolSize < 0, "must not be negative"},
		{"STORE_READS_IN_FLIGHT", c.StoreReadsInFlight <= 0, "must be positive"},
		{"MAX_KEY_BYTES", c.MaxKeyBytes <= 0, "must be positive"},
		{"MAX_BATCH", c.MaxBatch <= 0, "must be positive"},
		{"MAX_BATCH_REFS", c.MaxBatchRefs <= 0, "must be positive"},
		{"MAX_BODY_BYTES", c.MaxBodyBytes <= 0, "must be positive"},
		{"BODY_READ_TIMEOUT", c.BodyReadTimeout <= 0, "must be positive"},
		{"BODY_MEMORY_BYTES", c.BodyMemoryBytes < c.MaxBodyBytes, "must be at least BIGSEG_MAX_BODY_BYTES"},
		{"MAX_INFLIGHT", c.MaxInflight < 0, "must not be negative"},
		{"SHED_WAIT", c.ShedWait <= 0, "must be positive"},
		{"MAX_CONNS", c.MaxConns <= 0, "must be positive"},
		{"MAX_STREAMS", c.MaxStreams < 0, "must not be negative"},
		{"READ_HEADER_TIMEOUT", c.ReadHeaderTimeout <= 0, "must be positive"},
		{"READ_TIMEOUT", c.ReadTimeout <= 0, "must be positive"},
		{"WRITE_TIMEOUT", c.WriteTimeout <= 0, "must be positive"},
		{"IDLE_TIMEOUT", c.IdleTimeout <= 0, "must be positive"},
		{"MAX_HEADER_BYTES", c.MaxHeaderBytes < 1024, "must be at least 1024"},
		{"SHUTDOWN_DELAY", c.ShutdownDelay < 0, "must not be negative"},
		{"SHUTDOWN_TIMEOUT", c.ShutdownTimeout <= 0, "must be positive"},
	} {
		if ck.bad {
			bad(ck.name, "%s", ck.msg)
		}
	}
	if len(c.APITokens) > 0 && c.APITokensFile != "" {
		errs = append(errs, errors.New("BIGSEG_API_TOKENS and BIGSEG_API_TOKENS_FILE are both set: choose one"))
	}
	for _, t := range c.APITokens {
		if strings.TrimSpace(t) == "" {
			bad("API_TOKENS", "holds an empty token")
		}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		bad("LOG_LEVEL", "%v", err)
	}
	errs = append(errs, c.validateTLS()...)
	errs = append(errs, c.validateRedis()...)
	return errors.Join(errs...)
}

// validateTLS checks the settings of the HTTP listeners' TLS.
func (c config) validateTLS() []error {
	var errs []error
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("BIGSEG_TLS_CERT_FILE and BIGSEG_TLS_KEY_FILE go together"))
	}
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		errs = append(errs, errors.New("BIGSEG_TLS_CLIENT_CA_FILE is set without BIGSEG_TLS_CERT_FILE: mutual TLS needs TLS"))
	}
	if c.MetricsTLS && (c.TLSCertFile == "" || c.MetricsAddr == "") {
		errs = append(errs, errors.New("BIGSEG_METRICS_TLS needs BIGSEG_TLS_CERT_FILE and BIGSEG_METRICS_ADDR"))
	}
	return errs
}

// redactURLError keeps a URL's password out of an error that may quote the URL.
func redactURLError(err error, rawURL string) error {
	msg := err.Error()
	if i := strings.Index(rawURL, "://"); i >= 0 {
		if at := strings.LastIndex(rawURL, "@"); at > i {
			msg = strings.ReplaceAll(msg, rawURL[i+3:at], "xxxxx")
		}
	}
	return errors.New(msg)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return l, nil
}

// usage lists every variable with its default.
func usage(w io.Writer) error {
	fmt.Fprintf(w, "bigseg: which Big Segments is this context a member of?\n\n")
	fmt.Fprintf(w, "Usage:\n"+
		"  server                                      serve HTTP, configured by the environment below\n"+
		"  server load [--replace] [--batch N] FILE    write a fixture file into the configured Redis\n"+
		"  server healthcheck [--url URL]              exit 0 if the local server answers /livez\n"+
		"  server -h                                   this help\n\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var cfg config
	if err := envconfig.Usagef(envPrefix, &cfg, tw, envconfig.DefaultTableFormat); err != nil {
		return err
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}

// loadKeyPair is tls.LoadX509KeyPair with guard.ReadSettingFile.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := guard.ReadSettingFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := guard.ReadSettingFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}
