package dynamodb

import (
	"context"
	"slices"
	"time"

	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Observer is told what the package does against DynamoDB, for metrics: main gives one that
// counts in Prometheus, and this package knows nothing of it. Its methods are called on the
// goroutines making the calls, concurrently, so they must be safe for that, and quick.
type Observer interface {
	// Request is told of every request sent to DynamoDB (each attempt of a call the SDK
	// retries is one): its operation, one of Operations or "other"; the code of its error,
	// one of ErrorCodes, or "" for a success; and how long it took.
	Request(operation, code string, d time.Duration)
	// ConsumedReadCapacity is told of the read capacity units that a successful request's
	// answer says it consumed (BatchGetItem's, which reads ask for, and a scan's Query's).
	ConsumedReadCapacity(operation string, units float64)
	// UnprocessedRetried is told of the keys that a BatchGetItem answer left unprocessed and
	// that a read asks for again, after its backoff.
	UnprocessedRetried(keys int)
}

// operations are the operations of API, the only ones this package calls.
var operations = []string{"BatchGetItem", "BatchWriteItem", "Query", "UpdateItem"}

// Operations are the operation names an Observer is told of, besides "other": a fixed set,
// for a bounded label.
func Operations() []string { return slices.Clone(operations) }

// ErrorCodes are every code ErrorCode returns but "" (for nil): a fixed set, for a bounded
// label.
func ErrorCodes() []string {
	return append(slices.Clone(errorCodes), "unprocessed", "invalid_data", "deadline_exceeded", "canceled", "http_5xx", "other")
}

// WithObserver tells o of the unprocessed keys the store's reads ask for again. (The
// requests themselves are observed by the client: ClientOptions.Observer.)
func WithObserver(o Observer) Option { return func(s *Store) { s.observer = o } }

// observeMiddleware tells an Observer of every attempt of a call: it sits in the SDK's
// finalize step right after the retry middleware, so that it sees each attempt, signing and
// sending included, with the attempt's own error.
type observeMiddleware struct{ o Observer }

func (observeMiddleware) ID() string { return "BigsegObserve" }

func (m observeMiddleware) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	start := time.Now()
	out, md, err := next.HandleFinalize(ctx, in)
	op := middleware.GetOperationName(ctx)
	if !slices.Contains(operations, op) {
		op = "other"
	}
	m.o.Request(op, ErrorCode(err), time.Since(start))
	if err == nil {
		var consumed []types.ConsumedCapacity
		switch r := out.Result.(type) {
		case *awsdynamodb.BatchGetItemOutput:
			consumed = r.ConsumedCapacity
		case *awsdynamodb.QueryOutput: // a scan's, which asks for it (Load's does not)
			if r.ConsumedCapacity != nil {
				consumed = []types.ConsumedCapacity{*r.ConsumedCapacity}
			}
		}
		var units float64
		for _, c := range consumed {
			switch {
			case c.ReadCapacityUnits != nil:
				units += *c.ReadCapacityUnits
			case c.CapacityUnits != nil:
				units += *c.CapacityUnits
			}
		}
		if units > 0 {
			m.o.ConsumedReadCapacity(op, units)
		}
	}
	return out, md, err
}

// addObserver puts the observer's middleware in a call's stack.
func addObserver(o Observer) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Finalize.Insert(observeMiddleware{o}, "Retry", middleware.After)
	}
}
