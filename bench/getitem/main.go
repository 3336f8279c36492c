// Command getitem is the baseline of bench/dynamocold: a lookup server that reads DynamoDB as
// LaunchDarkly's SDK store does (go-server-sdk-dynamodb's BigSegmentStore.GetMembership), one
// strongly consistent GetItem of the context's item per lookup, with no cache, no batching
// and no status poll, behind bigseg's lookup route on chi, answering bigseg's JSON shape.
//
//	getitem -table TABLE [-addr 127.0.0.1:0] [-prefix P]
//
// Its DynamoDB client is bigseg's own (storage/dynamodb.NewClient: the AWS SDK's default
// chain, AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, the same transport and retries), so that what
// differs from bigseg with its cache off is the reads themselves: one call per lookup here,
// concurrent misses batched into BatchGetItem there. It prints "listening on ADDR" once it
// serves, and stops at SIGINT or SIGTERM.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/go-chi/chi/v5"

	"github.com/bigseg/bigseg/storage/dynamodb"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "getitem:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("getitem", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	table := fs.String("table", "", "DynamoDB table of the Big Segments data")
	prefix := fs.String("prefix", "", "prefix of the Big Segments data (none: LaunchDarkly's default on DynamoDB)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *table == "" {
		return errors.New("-table is required")
	}
	client, err := dynamodb.NewClient(ctx, dynamodb.ClientOptions{})
	if err != nil {
		return err
	}
	defer client.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	namespace := "big_segments_user"
	if *prefix != "" {
		namespace = *prefix + ":" + namespace
	}
	srv := &http.Server{Handler: newHandler(client.Client, *table, namespace), ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintln(stdout, "listening on", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// getter is the one call the server makes.
type getter interface {
	GetItem(ctx context.Context, in *awsdynamodb.GetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error)
}

// newHandler lists the one route: bigseg's lookup.
func newHandler(c getter, table, namespace string) http.Handler {
	r := chi.NewRouter()
	r.Get("/memberships/{contextKey}", func(w http.ResponseWriter, r *http.Request) {
		key := chi.URLParam(r, "contextKey")
		if r.URL.RawPath != "" { // chi hands over the escaped value then
			var err error
			if key, err = url.PathUnescape(key); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "context key is not validly percent-encoded"})
				return
			}
		}
		hash := hashKey(key)
		out, err := c.GetItem(r.Context(), &awsdynamodb.GetItemInput{
			TableName:      aws.String(table),
			ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{
				"namespace": &types.AttributeValueMemberS{Value: namespace},
				"key":       &types.AttributeValueMemberS{Value: hash},
			},
		})
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{
				"contextKey": key, "contextHash": hash, "status": "STORE_ERROR", "error": "the Big Segment store could not be read",
			})
			return
		}
		writeJSON(w, http.StatusOK, lookupResponse{ContextKey: key, ContextHash: hash,
			Memberships: memberships(out.Item), Status: "HEALTHY"})
	})
	return r
}

// lookupResponse has the shape of bigseg's answer to GET /memberships/{contextKey}.
type lookupResponse struct {
	ContextKey  string          `json:"contextKey"`
	ContextHash string          `json:"contextHash"`
	Memberships map[string]bool `json:"memberships"`
	Status      string          `json:"status"`
}

// memberships are an item's refs: excluded false, included true, an inclusion overriding an
// exclusion of the same ref, as the SDK's NewBigSegmentMembershipFromSegmentRefs reads them.
func memberships(item map[string]types.AttributeValue) map[string]bool {
	m := map[string]bool{}
	for _, set := range []struct {
		name string
		in   bool
	}{{"excluded", false}, {"included", true}} {
		if s, ok := item[set.name].(*types.AttributeValueMemberSS); ok {
			for _, ref := range s.Value {
				m[ref] = set.in
			}
		}
	}
	return m
}

// writeJSON is the one place that writes a JSON body.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// hashKey is the Big Segments hash of a context key: base64 of its SHA-256, as the SDK's.
func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return base64.StdEncoding.EncodeToString(sum[:])
}
