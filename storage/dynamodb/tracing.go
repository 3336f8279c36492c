package dynamodb

import (
	"context"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the client's spans.
const tracerName = "github.com/bigseg/bigseg/storage/dynamodb"

// traceMiddleware makes a client span of every call, named as the AWS SDKs name theirs
// ("DynamoDB.BatchGetItem"). It sits first in the SDK's initialize step, so that one span
// holds the whole call, its attempts and backoffs included. It records the operation, the
// tables, the region and the request ID, never a parameter of the call (which holds keys and
// hashes) nor anything of its signature; and it injects no trace header: DynamoDB has no use
// for one.
type traceMiddleware struct{ tracer trace.Tracer }

func (traceMiddleware) ID() string { return "BigsegTrace" }

func (m traceMiddleware) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	op := middleware.GetOperationName(ctx)
	ctx, span := m.tracer.Start(ctx, awsdynamodb.ServiceID+"."+op, trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	out, md, err := next.HandleInitialize(ctx, in)
	if !span.IsRecording() {
		return out, md, err
	}
	span.SetAttributes(semconv.RPCSystemNameKey.String("aws-api"), semconv.RPCMethod(awsdynamodb.ServiceID+"/"+op),
		semconv.DBSystemNameAWSDynamoDB, attribute.String("aws.region", awsmiddleware.GetRegion(ctx)))
	if tables := tableNames(in.Parameters); len(tables) > 0 {
		span.SetAttributes(semconv.AWSDynamoDBTableNames(tables...))
	}
	// The last attempt's answer, if one came: its request ID, for AWS support, and status.
	if id, ok := awsmiddleware.GetRequestIDMetadata(md); ok && id != "" {
		span.SetAttributes(semconv.AWSRequestID(id))
	}
	if resp, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok && resp.Response != nil && resp.StatusCode > 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	}
	if err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(ErrorCode(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	return out, md, err
}

// tableNames are the tables a call names, for the operations the store makes.
func tableNames(params any) []string {
	switch in := params.(type) {
	case *awsdynamodb.BatchGetItemInput:
		return slices.Sorted(maps.Keys(in.RequestItems))
	case *awsdynamodb.BatchWriteItemInput:
		return slices.Sorted(maps.Keys(in.RequestItems))
	case *awsdynamodb.QueryInput:
		return []string{aws.ToString(in.TableName)}
	case *awsdynamodb.UpdateItemInput:
		return []string{aws.ToString(in.TableName)}
	case *awsdynamodb.GetItemInput:
		return []string{aws.ToString(in.TableName)}
	case *awsdynamodb.PutItemInput:
		return []string{aws.ToString(in.TableName)}
	}
	return nil
}

// addTracing puts the span's middleware in a call's stack.
func addTracing(tp trace.TracerProvider) func(*middleware.Stack) error {
	m := traceMiddleware{tp.Tracer(tracerName)}
	return func(s *middleware.Stack) error { return s.Initialize.Add(m, middleware.Before) }
}
