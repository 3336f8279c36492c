// Command sdkdynamo compares LaunchDarkly's Go SDK reading Big Segments from DynamoDB with its
// own DynamoDB store (go-server-sdk-dynamodb) against the same SDK reading them through bigseg
// (its Redis store, go-server-sdk-redis-redigo, on bigseg's Redis-protocol listener, bigseg
// on the table). The tests (TestSDKStoresAgree) check that both answer the same; the program
// counts what each costs the table: DynamoDB requests and read units per 1,000 evaluations,
// counted by a proxy in front of moto_server (moto's DynamoDB emulator), for 1 or more SDK
// instances, populations of several sizes, the SDK's cache on and off. Run it with
// bench/sdkdynamo/run. A module of its own, so that LaunchDarkly's SDK stays out of bigseg's
// go.mod.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	server      string
	evals       int
	instances   []int
	contexts    []int
	concurrency int
	timeout     time.Duration
}

func main() {
	var c config
	var instances, contexts string
	flag.StringVar(&c.server, "server", "", "the bigseg server binary (bench/sdkdynamo/run builds it)")
	flag.IntVar(&c.evals, "evals", 1000, "evaluations in each phase (cold, then warm) of each run, over all SDK instances")
	flag.StringVar(&instances, "instances", "1,10", "SDK instances of each run, comma-separated (sharing one bigseg)")
	flag.StringVar(&contexts, "contexts", "100,5000", "distinct contexts evaluated (drawn uniformly), comma-separated")
	flag.IntVar(&c.concurrency, "concurrency", 8, "goroutines evaluating")
	flag.DurationVar(&c.timeout, "timeout", 20*time.Minute, "give up after this long")
	flag.Parse()
	var err1, err2 error
	c.instances, err1 = ints(instances)
	c.contexts, err2 = ints(contexts)
	if c.server == "" || err1 != nil || err2 != nil || c.evals < 1 {
		fmt.Fprintln(os.Stderr, "sdkdynamo: -server is required (use bench/sdkdynamo/run); -instances and -contexts are lists of positive integers")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sdkdynamo:", err)
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
