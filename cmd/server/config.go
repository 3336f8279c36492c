package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/bigseg/bigseg/handlers"
	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/internal/settings"
	"github.com/bigseg/bigseg/internal/telemetry"
	"github.com/bigseg/bigseg/segments"
	"github.com/bigseg/bigseg/storage/dynamodb"
	"github.com/bigseg/bigseg/storage/redis"
)

const varPrefix = "BIGSEG"

// config is the server's settings: every BIGSEG_* variable, its default and its bounds. The
// struct tags name each variable and describe it for -h (envconfig's format); loadConfig reads
// them through getenv and checks them at once, naming the variable at fault. Defaults live
// once, in defaultConfig (mostly the packages' own), which -h prints.
type config struct {
	Addr                      string        `envconfig:"ADDR" desc:"address to listen on"`
	TLSCertFile               string        `envconfig:"TLS_CERT_FILE" desc:"PEM certificate (chain) to serve HTTPS with on ADDR; re-read when it changes on disk"`
	TLSKeyFile                string        `envconfig:"TLS_KEY_FILE" desc:"PEM key of TLS_CERT_FILE"`
	TLSClientCAFile           string        `envconfig:"TLS_CLIENT_CA_FILE" desc:"PEM CA bundle: with it, clients must present a certificate it issued (mutual TLS)"`
	RedisURL                  string        `envconfig:"REDIS_URL" desc:"standalone Redis: redis://[user@]host:port[/db][?params], rediss:// for TLS, or unix://; go-redis's parameters set timeouts, retries and the pool (see docs/redis.md); one store setting (a Redis URL, DYNAMODB_TABLE or SEED_FILE) is required"`
	RedisClusterURL           string        `envconfig:"REDIS_CLUSTER_URL" desc:"Redis Cluster: redis://seed:port?addr=seed2:port&addr=..., rediss:// for TLS, with the same parameters"`
	RedisSentinelURL          string        `envconfig:"REDIS_SENTINEL_URL" desc:"Sentinel-managed Redis: redis://sentinel:port?addr=sentinel2:port&master_name=mymaster, the sentinels' own user and password before the host, rediss:// for TLS, with the same parameters"`
	RedisPasswordFile         string        `envconfig:"REDIS_PASSWORD_FILE" desc:"file holding the Redis password (with Sentinel, the master's), such as a mounted Kubernetes secret; not with a password in the URL"`
	RedisSentinelPasswordFile string        `envconfig:"REDIS_SENTINEL_PASSWORD_FILE" desc:"file holding the sentinels' own password, if they require one"`
	RedisTLSCAFile            string        `envconfig:"REDIS_TLS_CA_FILE" desc:"PEM CA bundle to verify Redis with (rediss://), instead of the system roots"`
	RedisTLSCertFile          string        `envconfig:"REDIS_TLS_CERT_FILE" desc:"PEM client certificate, for Redis servers that require one"`
	RedisTLSKeyFile           string        `envconfig:"REDIS_TLS_KEY_FILE" desc:"PEM key of the client certificate"`
	RedisTLSServerName        string        `envconfig:"REDIS_TLS_SERVER_NAME" desc:"name to verify Redis's certificates against, if not the host dialled"`
	DynamoDBTable             string        `envconfig:"DYNAMODB_TABLE" desc:"DynamoDB table of the Big Segments data (instead of Redis); region, credentials and endpoint come from the AWS SDK's own settings (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_DYNAMODB, ...): see docs/dynamodb.md"`
	DynamoDBConsistentRead    bool          `envconfig:"DYNAMODB_CONSISTENT_READ" desc:"strongly consistent DynamoDB reads; false halves their read capacity, but a read may miss the last second or so of writes"`
	Prefix                    string        `envconfig:"PREFIX" desc:"key prefix of the Big Segments data: one environment, named default; with DYNAMODB_TABLE, unset means none (LaunchDarkly's default there)"`
	Environments              []string      `envconfig:"ENVIRONMENTS" desc:"several environments in one Redis or DynamoDB table, as one Relay Proxy writes them: comma-separated name=prefix pairs, such as production=ld-prod,staging=ld-staging (instead of PREFIX); see docs/environments.md"`
	SeedFile                  string        `envconfig:"SEED_FILE" desc:"fixture file for the embedded store, to try bigseg out without Redis or DynamoDB (see docs/redis.md)"`
	CacheSize                 int           `envconfig:"CACHE_SIZE" desc:"most memberships cached; 0 turns the cache off" range:"not negative"`
	CacheTTL                  time.Duration `envconfig:"CACHE_TTL" desc:"how long a membership is cached while the store has no cursor; 0 turns the cache off" range:"not negative"`
	StatusPollInterval        time.Duration `envconfig:"STATUS_POLL_INTERVAL" desc:"how often the store's status is polled (at most STALE_AFTER)" range:"positive"`
	StaleAfter                time.Duration `envconfig:"STALE_AFTER" desc:"age of the last synchronization from which data counts as stale" range:"positive"`
	LookupTimeout             time.Duration `envconfig:"LOOKUP_TIMEOUT" desc:"longest a lookup (or batch) may wait for the store before it answers STORE_ERROR" range:"positive"`
	StoreReadsInFlight        int           `envconfig:"STORE_READS_IN_FLIGHT" desc:"most store reads at once, per environment; batches take at most half of them, single lookups the rest" range:"at least 2"`
	MaxKeyBytes               int           `envconfig:"MAX_KEY_BYTES" desc:"longest context key accepted, in bytes" range:"positive"`
	MaxBatch                  int           `envconfig:"MAX_BATCH" desc:"most lookups in one POST /memberships; its body holds at most that many keys of MAX_KEY_BYTES (413 beyond), its answer 100 times as many segment refs (400 beyond)" range:"positive"`
	BodyReadTimeout           time.Duration `envconfig:"BODY_READ_TIMEOUT" desc:"how long a client may take to send a request body (408 beyond); twice that for its headers, and for a Redis-protocol command once it has begun" range:"positive"`
	LogLevel                  string        `envconfig:"LOG_LEVEL" desc:"debug, info, warn or error; debug logs every request too (method, route pattern, code, duration; never the path)"`
	APITokens                 []string      `envconfig:"API_TOKENS" desc:"comma-separated bearer tokens; when set (or the file), every /memberships route, the store view (/segments, /explain and each /memberships/{contextKey}/explain) and /status/stream require one"`
	APITokensFile             string        `envconfig:"API_TOKENS_FILE" desc:"file of bearer tokens, one per line (# comments and blank lines ignored); re-read when it changes, and on SIGHUP"`
	MetricsAddr               string        `envconfig:"METRICS_ADDR" desc:"serve /metrics, the probes /livez, /healthz, /readyz and Go's /debug/pprof on this address too, such as :9090 (the operators' listener: keep it private); /metrics is then not on ADDR"`
	MetricsTLS                bool          `envconfig:"METRICS_TLS" desc:"serve METRICS_ADDR with the TLS settings of ADDR (client certificates included); else plain HTTP"`
	MaxConns                  int           `envconfig:"MAX_CONNS" desc:"most client connections open at once, on each listener; at the limit a silent, idle or stuck one is closed to make room; half of them may hold /status/stream (503 beyond)" range:"positive"`
	WriteTimeout              time.Duration `envconfig:"WRITE_TIMEOUT" desc:"how long writing a response may take (status streams excepted); at shutdown, after SHUTDOWN_DELAY, in-flight requests get as long to finish" range:"positive"`
	RESPAddr                  string        `envconfig:"RESP_ADDR" desc:"address of the Redis-protocol listener, such as :6380, for the SDKs' own Redis Big Segment stores (see docs/sdks.md), with the TLS settings of ADDR (rediss://; client certificates included); unset means off"`
	ReadyRequiresFresh        bool          `envconfig:"READY_REQUIRES_FRESH" desc:"make /readyz fail while the data is stale, not only while the store is unavailable"`
	InventoryInterval         time.Duration `envconfig:"INVENTORY_INTERVAL" desc:"how often each environment's store is scanned to count the contexts of each segment; 0: no scans" range:"0 or at least 1s"`
	InventoryReadsPerSecond   int           `envconfig:"INVENTORY_READS_PER_SECOND" desc:"most reads a scan makes a second: each context read counts one, and each key or item the walk of the store steps over (on Redis every key of the database, the environment's or not) one more" range:"at least 1"`
	InventoryMaxSegments      int           `envconfig:"INVENTORY_MAX_SEGMENTS" desc:"segments of each environment exported as bigseg_segment_contexts series, the largest" range:"0 to 10000"`
	ShutdownDelay             time.Duration `envconfig:"SHUTDOWN_DELAY" desc:"on SIGTERM, how long /readyz answers 503 while requests are still served, so load balancers notice (a second signal ends it; SIGINT, as from Ctrl-C, skips it)" range:"not negative"`

	// Not settings: derived from them (derive), or constants.
	ReadHeaderTimeout, ReadTimeout, IdleTimeout, RESPReadTimeout, RESPIdleTimeout, ShutdownTimeout time.Duration `ignored:"true"`
	MaxHeaderBytes, RESPMaxConns, MaxBatchRefs, MaxStreams                                         int           `ignored:"true"`
	MaxBodyBytes, BodyMemoryBytes                                                                  int64         `ignored:"true"`
}

// derive sets the limits that follow from the settings, each of which docs/configuration.md
// (Removed settings) says in full. A request gets a second more than its headers and body, so
// that a slow body gets its 408 first.
func (c *config) derive() {
	c.ReadHeaderTimeout = 2 * c.BodyReadTimeout
	c.ReadTimeout = c.ReadHeaderTimeout + c.BodyReadTimeout + time.Second
	c.RESPReadTimeout, c.RESPMaxConns = c.ReadHeaderTimeout, c.MaxConns
	c.ShutdownTimeout = c.WriteTimeout
	c.MaxBatchRefs = 100 * c.MaxBatch
	c.MaxBodyBytes = int64(c.MaxBatch)*int64(c.MaxKeyBytes+24) + 1024
	c.BodyMemoryBytes = max(64<<20, 64*c.MaxBodyBytes)
	c.MaxStreams = c.MaxConns / 2
	c.IdleTimeout, c.MaxHeaderBytes, c.RESPIdleTimeout = 2*time.Minute, 16<<10, 0
}

func defaultConfig() config {
	c := config{
		Addr:                    ":8080",
		DynamoDBConsistentRead:  true,
		Prefix:                  redis.DefaultPrefix,
		CacheSize:               segments.DefaultCacheSize,
		CacheTTL:                segments.DefaultCacheTTL,
		StatusPollInterval:      segments.DefaultPollInterval,
		StaleAfter:              segments.DefaultStaleAfter,
		LookupTimeout:           segments.DefaultLookupTimeout,
		StoreReadsInFlight:      segments.DefaultReadsInFlight,
		MaxKeyBytes:             handlers.DefaultMaxKeyBytes,
		MaxBatch:                handlers.DefaultMaxBatch,
		BodyReadTimeout:         handlers.DefaultBodyReadTimeout,
		LogLevel:                "info",
		MaxConns:                4096,
		WriteTimeout:            15 * time.Second,
		ShutdownDelay:           5 * time.Second,
		InventoryInterval:       time.Hour,
		InventoryReadsPerSecond: 1000,
		InventoryMaxSegments:    100,
	}
	c.derive()
	return c
}

// loadConfig reads the configuration from the BIGSEG_* variables that getenv gives, and checks
// it. An empty variable counts as unset. Every error names the variable at fault.
func loadConfig(getenv func(string) string) (config, error) {
	cfg := defaultConfig()
	if err := settings.Read(getenv, varPrefix, &cfg); err != nil {
		return cfg, err
	}
	cfg.derive()
	prefixSet := getenv(varPrefix+"_PREFIX") != ""
	if prefixSet && len(cfg.Environments) > 0 {
		return cfg, errors.New("BIGSEG_PREFIX and BIGSEG_ENVIRONMENTS are both set: give each environment's prefix in BIGSEG_ENVIRONMENTS")
	}
	if !prefixSet && cfg.hasDynamoDB() {
		cfg.Prefix = dynamodb.DefaultPrefix // LaunchDarkly's default for DynamoDB is none, not Redis's
	}
	return cfg, cfg.validate()
}

func unknownVariables(environ []string) error {
	return settings.Unknown(environ, varPrefix, &config{}, removed)
}

// removed are the settings that went, each with what replaces it (%s: the value it was
// given, where that is no secret): operators have them in their manifests, so each is refused
// with its replacement rather than silently ignored. docs/configuration.md lists them.
var removed = map[string]string{
	"REDIS_CLUSTER_ADDRS":            "give BIGSEG_REDIS_CLUSTER_URL=redis://host1:port?addr=host2:port&addr=host3:port (the addresses were %s)",
	"REDIS_SENTINEL_ADDRS":           "give BIGSEG_REDIS_SENTINEL_URL=redis://sentinel1:port?addr=sentinel2:port&master_name=<master> (the addresses were %s)",
	"REDIS_SENTINEL_MASTER":          "put master_name=%s in BIGSEG_REDIS_SENTINEL_URL",
	"REDIS_SENTINEL_PASSWORD":        "put it in BIGSEG_REDIS_SENTINEL_URL (redis://:<password>@sentinel:26379?...) or in the file BIGSEG_REDIS_SENTINEL_PASSWORD_FILE names",
	"REDIS_DB":                       "put the database in the Redis URL: redis://host:6379/%[1]s (or db=%[1]s as a parameter)",
	"REDIS_USERNAME":                 "put the user in the Redis URL: redis://%s@host:6379 (with Sentinel, username=%[1]s as a parameter)",
	"REDIS_PASSWORD":                 "put it in the file BIGSEG_REDIS_PASSWORD_FILE names, or in the Redis URL (redis://:<password>@host:6379; with Sentinel, password=<password> as a parameter)",
	"REDIS_TLS":                      "use a rediss:// Redis URL for TLS",
	"REDIS_TLS_INSECURE_SKIP_VERIFY": "put skip_verify=true in BIGSEG_REDIS_URL (rediss://; for testing only)",
	"REDIS_DIAL_TIMEOUT":             "put dial_timeout=%s in the Redis URL",
	"REDIS_READ_TIMEOUT":             "put read_timeout=%s in the Redis URL",
	"REDIS_WRITE_TIMEOUT":            "put write_timeout=%s in the Redis URL",
	"REDIS_MAX_RETRIES":              "put max_retries=%s in the Redis URL (-1 for none)",
	"REDIS_POOL_SIZE":                "put pool_size=%s in the Redis URL",
	"READ_HEADER_TIMEOUT":            "a client gets twice BIGSEG_BODY_READ_TIMEOUT to send its headers: set that (to half of %s) instead",
	"READ_TIMEOUT":                   "a request gets the time of its headers and its body, a second more: set BIGSEG_BODY_READ_TIMEOUT instead",
	"IDLE_TIMEOUT":                   "idle keep-alive connections close after 2 minutes, and sooner at BIGSEG_MAX_CONNS to make room",
	"MAX_HEADER_BYTES":               "request headers are bounded at 16 KiB (431 beyond, after the 4 KiB of slack Go's server adds)",
	"RESP_MAX_CONNS":                 "the Redis-protocol listener takes as many connections as BIGSEG_MAX_CONNS: set that (to %s) instead",
	"RESP_READ_TIMEOUT":              "a Redis-protocol command gets twice BIGSEG_BODY_READ_TIMEOUT to arrive: set that (to half of %s) instead",
	"SHED_WAIT":                      "lookups wait for no slot of their own: a lookup that misses the cache waits for one of its environment's BIGSEG_STORE_READS_IN_FLIGHT store reads, within BIGSEG_LOOKUP_TIMEOUT",
	"MAX_BATCH_REFS":                 "a batch's answer holds at most 100 segment refs a lookup of BIGSEG_MAX_BATCH: set that (to a hundredth of %s) instead",
	"ACCESS_LOG":                     "every request is logged at BIGSEG_LOG_LEVEL=debug",
	"RESP_TLS":                       "the Redis-protocol listener serves TLS (rediss://) whenever BIGSEG_TLS_CERT_FILE is set, plain otherwise",
	"MAX_INFLIGHT":                   "lookups are bounded by the connections, one at a time on each (BIGSEG_MAX_CONNS on each listener), and their store reads by BIGSEG_STORE_READS_IN_FLIGHT in each environment: set those instead",
	"MAX_STREAMS":                    "half of BIGSEG_MAX_CONNS may hold status streams: set that (to 2 x %s) instead",
	"MAX_BODY_BYTES":                 "a batch's body holds BIGSEG_MAX_BATCH keys of BIGSEG_MAX_KEY_BYTES and their JSON punctuation: set those instead",
	"SHUTDOWN_TIMEOUT":               "after BIGSEG_SHUTDOWN_DELAY, in-flight requests get BIGSEG_WRITE_TIMEOUT to finish, as long as any may take: set that (to %s, if it still holds a lookup) instead",
	"CACHE_TTL_WITH_CURSOR":          "while the store has a cursor, a cached membership lives until the cursor changes, at most 1 hour",
	"PPROF_ADDR":                     "Go's /debug/pprof is served on the BIGSEG_METRICS_ADDR listener, the operators' one: set that (to %s) instead",
	"BODY_MEMORY_BYTES":              "the batch bodies being read or answered share 64 MiB, or 64 times the largest body (BIGSEG_MAX_BATCH keys of BIGSEG_MAX_KEY_BYTES) if that is more",
	"RESP_IDLE_TIMEOUT":              "Redis-protocol connections may wait for their next command without a bound, as Redis's own (timeout 0); at BIGSEG_MAX_CONNS the idlest is closed to make room",
}

func (c config) validate() error {
	errs := settings.Check(varPrefix, &c)
	// A response must be written within WRITE_TIMEOUT of the end of the request's headers, else
	// the client gets no answer at all: a batch's body and its lookup must fit in it. In
	// seconds, as floats: a sum of durations near their limit would wrap round to a small one.
	if c.LookupTimeout.Seconds()+c.BodyReadTimeout.Seconds() >= c.WriteTimeout.Seconds() {
		errs = append(errs, fmt.Errorf("BIGSEG_LOOKUP_TIMEOUT + BIGSEG_BODY_READ_TIMEOUT (%s + %s) must be less than BIGSEG_WRITE_TIMEOUT (%s), within which a lookup's answer is written: lower the first or raise the second",
			c.LookupTimeout, c.BodyReadTimeout, c.WriteTimeout))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("BIGSEG_LOG_LEVEL: %w", err))
	}
	if envs, err := c.servedEnvironments(); err != nil {
		errs = append(errs, err)
	} else if c.CacheSize > 0 && c.CacheSize < 2*len(envs) {
		errs = append(errs, fmt.Errorf("BIGSEG_CACHE_SIZE: %d cannot be shared by %d environments: 2 each at least, or 0 (no cache)", c.CacheSize, len(envs)))
	}
	errs = append(errs, auth.CheckTokens(c.APITokens, c.APITokensFile)...)
	errs = append(errs, auth.CheckTLS(c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile, c.MetricsTLS, c.MetricsAddr)...)
	errs = append(errs, c.validateStores()...)
	return errors.Join(errs...)
}

func (c config) hasRedis() bool { return len(c.redisURLs().URLSettings()) > 0 }

func (c config) hasDynamoDB() bool { return c.DynamoDBTable != "" }

func (c config) redisURLs() redis.ClientOptions {
	return redis.ClientOptions{URL: c.RedisURL, ClusterURL: c.RedisClusterURL, SentinelURL: c.RedisSentinelURL}
}

func (c config) redisFiles() redis.Files {
	return redis.Files{Password: c.RedisPasswordFile, SentinelPassword: c.RedisSentinelPasswordFile,
		TLSCA: c.RedisTLSCAFile, TLSCert: c.RedisTLSCertFile, TLSKey: c.RedisTLSKeyFile, TLSServerName: c.RedisTLSServerName,
		Read: auth.ReadSettingFile}
}

// redisOptions are the Redis client's options, secrets and certificates read from their files.
func (c config) redisOptions() (redis.ClientOptions, error) {
	return c.redisURLs().WithFiles(c.redisFiles())
}

// validateStores checks that one store is configured, and each store's settings. Where to
// connect to DynamoDB, and as whom, are the AWS SDK's own settings (AWS_*), which bigseg does
// not repeat.
func (c config) validateStores() []error {
	errs := c.redisURLs().Check(c.redisFiles())
	stores := c.redisURLs().URLSettings()
	if c.hasDynamoDB() {
		if !dynamodb.IsTableName(c.DynamoDBTable) {
			errs = append(errs, fmt.Errorf("BIGSEG_DYNAMODB_TABLE: %.80q is not a table name (3 to 255 of A-Z, a-z, 0-9, _ - .) or a table's ARN", c.DynamoDBTable))
		}
		for _, name := range stores {
			errs = append(errs, fmt.Errorf("BIGSEG_DYNAMODB_TABLE and %s are both set: choose one store", name))
		}
		stores = append([]string{"BIGSEG_DYNAMODB_TABLE"}, stores...)
	} else if !c.DynamoDBConsistentRead {
		errs = append(errs, errors.New("BIGSEG_DYNAMODB_CONSISTENT_READ is set but no DynamoDB table is: set BIGSEG_DYNAMODB_TABLE"))
	}
	if c.SeedFile != "" && len(stores) > 0 {
		errs = append(errs, fmt.Errorf("BIGSEG_SEED_FILE is for the embedded store, but %s is set", stores[0]))
	}
	if len(c.Environments) > 1 && len(stores) == 0 {
		errs = append(errs, errors.New("BIGSEG_ENVIRONMENTS: the embedded store serves one environment: configure Redis (BIGSEG_REDIS_URL, BIGSEG_REDIS_CLUSTER_URL or BIGSEG_REDIS_SENTINEL_URL), or give one environment"))
	}
	return errs
}

// servedEnvironments are the environments served, by name and prefix (openStore gives them
// their stores): those of BIGSEG_ENVIRONMENTS, or one, named default, of BIGSEG_PREFIX. A pair
// that is malformed, or repeats a name or prefix, is an error that names it.
func (c config) servedEnvironments() ([]segments.Environment, error) {
	if len(c.Environments) == 0 {
		if err := segments.ValidatePrefix(c.Prefix); err != nil {
			return nil, fmt.Errorf("BIGSEG_PREFIX: %w", err)
		}
		return []segments.Environment{{Name: "default", Prefix: c.Prefix}}, nil
	}
	var envs []segments.Environment
	names, prefixes := map[string]bool{}, map[string]bool{}
	for i, pair := range c.Environments {
		name, prefix, ok := strings.Cut(pair, "=")
		name, prefix = strings.TrimSpace(name), strings.TrimSpace(prefix)
		bad := func(why string) error {
			return fmt.Errorf("BIGSEG_ENVIRONMENTS: pair %d (%q): %s", i+1, pair, why)
		}
		invalid := cmp.Or(segments.ValidateName(name), segments.ValidatePrefix(prefix))
		switch {
		case pair == "":
			return nil, bad("empty: want name=prefix")
		case !ok:
			return nil, bad("want name=prefix")
		case prefix == "" && !c.hasDynamoDB():
			return nil, bad("want name=prefix (an empty prefix is DynamoDB's default only)")
		case c.hasDynamoDB() && (prefix == "" && prefixes["launchdarkly"] || prefix == "launchdarkly" && prefixes[""]):
			return nil, bad("the empty prefix and launchdarkly cannot both be served: the Redis-protocol listener serves the empty one as launchdarkly")
		case invalid != nil:
			return nil, bad(invalid.Error())
		case names[name]:
			return nil, bad("the name " + name + " is given twice")
		case prefixes[prefix]:
			return nil, bad("the prefix " + prefix + " is given twice")
		}
		names[name], prefixes[prefix] = true, true
		envs = append(envs, segments.Environment{Name: name, Prefix: prefix})
	}
	return envs, nil
}

// environmentPrefix is the key prefix of the environment named (of BIGSEG_ENVIRONMENTS; "" for
// the only one there is), for server load.
func (c config) environmentPrefix(name string) (string, error) {
	envs, err := c.servedEnvironments()
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range envs {
		if e.Name == name || name == "" && len(envs) == 1 {
			return e.Prefix, nil
		}
		names = append(names, e.Name)
	}
	if name == "" {
		return "", fmt.Errorf("load: several environments are configured: give --environment, one of %s", strings.Join(names, ", "))
	}
	return "", fmt.Errorf("load: no environment %q: the environments are %s", name, strings.Join(names, ", "))
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return l, nil
}

// usage is server -h: the commands and every variable read, BIGSEG_* and OTEL_*.
func usage(w io.Writer) error {
	fmt.Fprintf(w, "bigseg: which Big Segments is this context a member of?\n\n")
	fmt.Fprintf(w, "Usage:\n"+
		"  server                                      serve HTTP, configured by the environment below\n"+
		"  server load [--replace] [--dry-run] [--environment E] F\n"+
		"                                              write fixture file F into the configured Redis or DynamoDB table\n"+
		"  server inventory [--environment E] [--json] count each segment's contexts in the store, once\n"+
		"  server healthcheck [--url URL]              exit 0 if the local server answers /livez\n"+
		"  server -version                             print the version\n"+
		"  server -h                                   this help\n\n")
	cfg := defaultConfig()
	if err := settings.Usage(w, varPrefix, &cfg); err != nil {
		return err
	}
	return telemetry.Usage(w)
}
