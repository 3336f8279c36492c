package dynamodb

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/credentials/processcreds"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	smithy "github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"go.opentelemetry.io/otel/trace"

	"github.com/bigseg/bigseg/segments"
)

// Defaults of a client's retries. The SDK's own (3 attempts, backoffs up to 20 s, and a
// retry quota shared by every call that fails calls outright once spent) would make a
// throttled table look like a hang; the caller's context bounds whatever these add up to.
const (
	DefaultMaxAttempts = 3
	DefaultMaxBackoff  = 100 * time.Millisecond
)

// Bounds of calls out. callTimeout bounds any one HTTP call of the client, credentials'
// included: far above what DynamoDB or STS take, it only ends calls that would never end.
// credentialsTimeout bounds a fetch of credentials, which every call waiting for
// credentials shares: one that has not ended by then is given up, and the next call starts
// a new one, so that a fetch that hangs (an STS that accepts and never answers, a
// credential_process whose child keeps its output open) keeps bigseg down for at most that
// long after its cause has gone.
const (
	callTimeout        = 30 * time.Second
	credentialsTimeout = 5 * time.Second
)

// freshCredentials fetches credentials through a credential chain of its own, loaded from
// the configuration for each fetch, for at most credentialsTimeout. The SDK's cache of a
// chain shares its one fetch among every caller, without a deadline: a fetch that hangs
// would hang every later one behind it. Given up, a fetch goes on in the background
// until its own bounds end it (callTimeout, the process provider's Timeout), holding
// nothing that a later fetch waits for. The client's cache keeps what a fetch returns.
func freshCredentials(load func(context.Context) (aws.Config, error)) aws.CredentialsProviderFunc {
	return func(ctx context.Context) (aws.Credentials, error) {
		ctx, cancel := context.WithTimeout(ctx, credentialsTimeout)
		defer cancel()
		cfg, err := load(ctx)
		if err != nil {
			return aws.Credentials{}, err
		}
		if cfg.Credentials == nil {
			return aws.Credentials{}, errors.New("no credentials configured")
		}
		return cfg.Credentials.Retrieve(ctx)
	}
}

// ClientOptions tune NewClient. Where to connect, and as whom, is the SDK's business: its
// default chain and the standard variables (AWS_REGION, AWS_PROFILE, AWS_ACCESS_KEY_ID,
// AWS_ENDPOINT_URL_DYNAMODB, AWS_MAX_ATTEMPTS and the rest).
type ClientOptions struct {
	// MaxAttempts of one call, the first included; 0 means AWS_MAX_ATTEMPTS (or a profile's
	// max_attempts) if set, else DefaultMaxAttempts.
	MaxAttempts int
	// MaxBackoff between two attempts; 0 means DefaultMaxBackoff.
	MaxBackoff time.Duration
	// MaxIdleConns is how many idle connections are kept for reuse; 0 means 64, enough for
	// bigseg's concurrent reads without a TLS handshake each.
	MaxIdleConns int
	// Observer, when set, is told of every request the client sends (each attempt), with
	// its code and duration, and of the read capacity the answers say they consumed.
	Observer Observer
	// TracerProvider, when set, makes a client span of every call, its retries within it:
	// operation, table, region, request ID, never a key. Nil for none.
	TracerProvider trace.TracerProvider
}

// Client is the SDK's DynamoDB client, with the HTTP transport it owns.
type Client struct {
	*awsdynamodb.Client
	transport *http.Transport
}

// NewClient makes a DynamoDB client from the SDK's default configuration chain, with
// retries bounded as the options say (standard mode, no client-side retry quota). Every call
// gives up when its context ends, retries and backoffs included, and waiting for credentials
// too; no HTTP call lasts longer than callTimeout, and a fetch of credentials that hangs
// holds later ones back for at most credentialsTimeout. The caller closes it.
func NewClient(ctx context.Context, o ClientOptions) (*Client, error) {
	if o.MaxIdleConns <= 0 {
		o.MaxIdleConns = 64
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	// The SDK's buildable client, so that the configuration can add to it (AWS_CA_BUNDLE),
	// then frozen into the *http.Client it builds, whose transport Close can reach. It is
	// the client of every call out, credentials' included (STS, SSO, IMDS, ECS and EKS
	// Pod Identity's endpoint), and none of them lasts longer than callTimeout.
	hc := awshttp.NewBuildableClient().WithTimeout(callTimeout).WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = o.MaxIdleConns, o.MaxIdleConns
	})
	load := func(ctx context.Context) (aws.Config, error) {
		return config.LoadDefaultConfig(ctx, config.WithHTTPClient(hc),
			config.WithEndpointCredentialOptions(func(eo *endpointcreds.Options) { eo.HTTPClient = hc }),
			config.WithProcessCredentialOptions(func(po *processcreds.Options) { po.Timeout = credentialsTimeout }))
	}
	cfg, err := load(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	cfg.Credentials = aws.NewCredentialsCache(freshCredentials(load))
	var tr *http.Transport
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		frozen := bc.Freeze()
		if c, ok := frozen.(*http.Client); ok {
			tr, _ = c.Transport.(*http.Transport)
		}
		cfg.HTTPClient = frozen
	}
	if cfg.Region == "" {
		return nil, errors.New("AWS configuration: no region: set AWS_REGION, or a region in the AWS profile")
	}
	cfg.Retryer = retryer(o, cfg.RetryMaxAttempts)
	cfg.RetryMaxAttempts, cfg.RetryMode = 0, "" // the retryer decides
	client := awsdynamodb.NewFromConfig(cfg, func(do *awsdynamodb.Options) {
		// The SDK's own check of the checksum runs as the body is closed, after decoding,
		// and only logs a mismatch: checksumMiddleware's fails the call before.
		do.DisableValidateResponseChecksum = true
		do.APIOptions = append(do.APIOptions, addChecksum, addTableNotFound)
		if o.Observer != nil {
			do.APIOptions = append(do.APIOptions, addObserver(o.Observer))
		}
		if o.TracerProvider != nil {
			do.APIOptions = append(do.APIOptions, addTracing(o.TracerProvider))
		}
	})
	return &Client{Client: client, transport: tr}, nil
}

// retryer is the SDK's standard retryer with o's bounds: o.MaxAttempts, else the
// configuration's (AWS_MAX_ATTEMPTS, max_attempts: configured), else DefaultMaxAttempts; no
// client-side retry quota.
func retryer(o ClientOptions, configured int) func() aws.Retryer {
	attempts := cmp.Or(max(o.MaxAttempts, 0), max(configured, 0), DefaultMaxAttempts)
	return func() aws.Retryer {
		return retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts, so.MaxBackoff, so.RateLimiter = attempts, o.MaxBackoff, ratelimit.None
		})
	}
}

// Close closes the client's idle connections. The client still works after it (with new
// connections); main calls it once every store is done.
func (c *Client) Close() {
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

// Region is the region the client calls, for logs.
func (c *Client) Region() string { return c.Options().Region }

// Endpoint is the endpoint the client calls if one was configured
// (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL), "" for the region's own, for logs.
func (c *Client) Endpoint() string { return aws.ToString(c.Options().BaseEndpoint) }

// errorCodes are the DynamoDB error codes that ErrorCode tells apart.
var errorCodes = []string{
	"AccessDeniedException",
	"ExpiredTokenException",
	"InternalServerError",
	"ProvisionedThroughputExceededException",
	"RequestLimitExceeded",
	"ResourceNotFoundException",
	"ServiceUnavailable",
	"ThrottlingException",
	"UnrecognizedClientException",
	"ValidationException",
}

// ErrorCode is a bounded label for an error of this package, for metrics: one of the
// DynamoDB error codes above, "unprocessed" (ErrUnprocessed), "invalid_data" (data or
// metadata of the wrong type), "deadline_exceeded", "canceled", "http_5xx" (a server error
// without one of the codes), "other", or "" for nil.
func ErrorCode(err error) string {
	var api smithy.APIError
	var resp *smithyhttp.ResponseError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &api) && slices.Contains(errorCodes, api.ErrorCode()):
		return api.ErrorCode()
	case errors.Is(err, ErrUnprocessed):
		return "unprocessed"
	case errors.Is(err, segments.ErrInvalidData), errors.Is(err, segments.ErrInvalidMetadata):
		return "invalid_data"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &resp) && resp.HTTPStatusCode() >= 500:
		return "http_5xx"
	}
	return "other"
}

// checksumMiddleware checks the body of every answer against its X-Amz-Crc32 (DynamoDB sends
// one with each) before it is decoded, and fails the call if they differ: a body cut short,
// even to nothing, decodes as an answer with no items, which must not be read as "no item".
type checksumMiddleware struct{}

func (checksumMiddleware) ID() string { return "BigsegChecksum" }

func (checksumMiddleware) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if err != nil || !ok || resp.Header.Get("X-Amz-Crc32") == "" {
		return out, md, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return out, md, fmt.Errorf("read the answer: %w", err)
	}
	if want, got := resp.Header.Get("X-Amz-Crc32"), strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10); got != want {
		return out, md, fmt.Errorf("the answer's %d bytes have the checksum %s, not its X-Amz-Crc32 %s", len(body), got, want)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return out, md, nil
}

// addChecksum puts checksumMiddleware last in the deserialize step, where it is the first
// to see the answer, before the operation's deserializer reads it.
func addChecksum(s *middleware.Stack) error {
	return s.Deserialize.Add(checksumMiddleware{}, middleware.After)
}

// tableNotFoundMiddleware names the table, and the region, in the error of a call that
// DynamoDB answers ResourceNotFoundException, whose own message ("Requested resource not
// found") names neither: the first thing a load into a table not yet created shows.
type tableNotFoundMiddleware struct{}

func (tableNotFoundMiddleware) ID() string { return "BigsegTableNotFound" }

func (tableNotFoundMiddleware) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleInitialize(ctx, in)
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ResourceNotFoundException" {
		if tables := tableNames(in.Parameters); len(tables) > 0 {
			err = fmt.Errorf("table %s in region %s: %w", strings.Join(tables, ", "), awsmiddleware.GetRegion(ctx), err)
		}
	}
	return out, md, err
}

func addTableNotFound(s *middleware.Stack) error {
	return s.Initialize.Add(tableNotFoundMiddleware{}, middleware.After)
}
