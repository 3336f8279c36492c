package ldbigseg_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// This file gives the tests a DynamoDB: one moto_server process (moto's emulator) per test
// run, started by the first test that needs it on a port it picks itself, and stopped by
// TestMain; a table per test; and writes of LaunchDarkly's DynamoDB layout the way the Relay
// Proxy makes them. Without moto_server on PATH those tests skip, unless
// BIGSEG_TEST_REQUIRE_REDIS=1 (which asks for every outside system the tests use).

// awsRegion is the region of every client of the emulator, bigseg's included.
const awsRegion = "us-east-1"

var moto struct {
	sync.Mutex
	srv     *motoServer
	err     error
	skipped int // tests skipped for want of moto_server
}

// sharedMoto returns the run's moto_server, starting it at first use. It skips the test (fails
// it with BIGSEG_TEST_REQUIRE_REDIS=1) if moto_server is not installed or does not start.
func sharedMoto(t *testing.T) *motoServer {
	t.Helper()
	moto.Lock()
	defer moto.Unlock()
	if moto.srv == nil && moto.err == nil {
		moto.srv, moto.err = startMoto()
	}
	if moto.err != nil {
		if os.Getenv("BIGSEG_TEST_REQUIRE_REDIS") == "1" {
			t.Fatalf("%v (BIGSEG_TEST_REQUIRE_REDIS=1)", moto.err)
		}
		moto.skipped++
		t.Skipf("%v; put moto_server (moto[server]) on PATH, or set BIGSEG_TEST_REQUIRE_REDIS=1 to fail instead", moto.err)
	}
	return moto.srv
}

// stopMoto stops the run's moto_server, if one started, and says how many tests skipped for
// want of it: go test shows nothing of a package that passes but its "ok", so the line goes
// to the terminal (/dev/tty) when there is one, else to standard error.
func stopMoto() {
	moto.Lock()
	defer moto.Unlock()
	if moto.srv != nil {
		moto.srv.Stop()
	}
	if moto.skipped > 0 {
		w := os.Stderr
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			defer tty.Close()
			w = tty
		}
		fmt.Fprintf(w, "ldbigseg: %d DynamoDB tests skipped: %v (put moto_server on PATH, or set BIGSEG_TEST_REQUIRE_REDIS=1 to fail them)\n",
			moto.skipped, moto.err)
	}
}

// motoServer is a moto_server process.
type motoServer struct {
	URL string // http://127.0.0.1:port

	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	log    []string // its last lines
}

var motoListening = regexp.MustCompile(`Running on (http://127\.0\.0\.1:[0-9]+)`)

// startMoto starts moto_server on port 0, so that it binds a free port itself, reads the port
// from the line it logs, and returns once it answers a DynamoDB call.
func startMoto() (*motoServer, error) {
	path, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, errors.New("moto_server is not installed")
	}
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", "0")
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	// Its own process group, killed whole (moto_server may be a wrapper such as pyenv's shim),
	// and killed with the test binary if that dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	m := &motoServer{cmd: cmd, exited: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr) // a line a request, drained until it exits
		for sc.Scan() {
			m.mu.Lock()
			if len(m.log) == 50 {
				m.log = m.log[1:]
			}
			m.log = append(m.log, sc.Text())
			m.mu.Unlock()
			if s := motoListening.FindStringSubmatch(sc.Text()); s != nil {
				select {
				case found <- s[1]:
				default:
				}
			}
		}
		cmd.Wait()
		close(m.exited)
	}()
	select {
	case m.URL = <-found:
	case <-m.exited:
		return nil, fmt.Errorf("moto_server exited before listening:\n%s", m.Log())
	case <-time.After(60 * time.Second): // a bound on a hung start
		m.Stop()
		return nil, fmt.Errorf("moto_server did not say where it listens within 60s:\n%s", m.Log())
	}
	c, closeIdle := dynamoClient(m.URL)
	defer closeIdle()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.ListTables(ctx, &awsdynamodb.ListTablesInput{})
		cancel()
		if err == nil {
			return m, nil
		}
		if time.Now().After(deadline) {
			m.Stop()
			return nil, fmt.Errorf("moto_server at %s does not answer: %v\n%s", m.URL, err, m.Log())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// Log is the last lines moto_server wrote.
func (m *motoServer) Log() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.log, "\n")
}

// Stop kills the server's process group and waits for it to exit.
func (m *motoServer) Stop() {
	select {
	case <-m.exited:
		return
	default:
	}
	syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.exited
}

// Client returns a client of the server, whose connections are closed when the test ends.
func (m *motoServer) Client(t *testing.T) *awsdynamodb.Client {
	c, closeIdle := dynamoClient(m.URL)
	t.Cleanup(closeIdle)
	return c
}

// BigsegSettings are the settings with which bigseg reads table on the server: the AWS SDK's
// own variables (endpoint, region, fake credentials; no profile or instance role of this
// machine), and BIGSEG_DYNAMODB_TABLE.
func (m *motoServer) BigsegSettings(t *testing.T, table string) []string {
	dir := t.TempDir()
	return []string{
		"BIGSEG_DYNAMODB_TABLE=" + table,
		"AWS_ENDPOINT_URL_DYNAMODB=" + m.URL,
		"AWS_REGION=" + awsRegion,
		"AWS_ACCESS_KEY_ID=ldbigsegtest",
		"AWS_SECRET_ACCESS_KEY=ldbigsegtest",
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// dynamoClient is a client of endpoint with fake credentials, and a function that closes its
// idle connections.
func dynamoClient(endpoint string) (*awsdynamodb.Client, func()) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	c := awsdynamodb.New(awsdynamodb.Options{
		Region:       awsRegion,
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "ldbigsegtest", SecretAccessKey: "ldbigsegtest", Source: "test"}, nil
		}),
		HTTPClient: &http.Client{Transport: tr},
	})
	return c, tr.CloseIdleConnections
}

// testTable creates a table of LaunchDarkly's DynamoDB schema (partition key "namespace",
// sort key "key", both strings) that no other test uses, deleted when the test ends.
func testTable(t *testing.T, c *awsdynamodb.Client) string {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	table := "ldbigseg-" + name + "-" + hex.EncodeToString(b[:])
	_, err := c.CreateTable(context.Background(), &awsdynamodb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("namespace"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("key"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("namespace"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("key"), KeyType: types.KeyTypeRange},
		},
	})
	if err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	t.Cleanup(func() { c.DeleteTable(context.Background(), &awsdynamodb.DeleteTableInput{TableName: &table}) })
	return table
}

// ldDynamoLayout writes Big Segments data in LaunchDarkly's DynamoDB layout under a prefix
// ("" for none, LaunchDarkly's DynamoDB default), spelled out here rather than taken from
// bigseg, so that a bigseg that read it wrong fails against it:
//
//   - a context: namespace "{prefix}:big_segments_user" ("big_segments_user" with no prefix),
//     key its hash, string sets "included" and "excluded";
//   - the metadata: namespace and key "{prefix}:big_segments_metadata", with "synchronizedOn"
//     (a number, unix ms) and "lastVersion" (a string, the synchronizer's version).
type ldDynamoLayout struct {
	c      *awsdynamodb.Client
	table  string
	prefix string
}

func (l ldDynamoLayout) namespace(base string) string {
	if l.prefix == "" {
		return base
	}
	return l.prefix + ":" + base
}

func (l ldDynamoLayout) userNamespace() string { return l.namespace("big_segments_user") }
func (l ldDynamoLayout) metadataKey() string   { return l.namespace("big_segments_metadata") }

func itemKey(namespace, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"namespace": &types.AttributeValueMemberS{Value: namespace},
		"key":       &types.AttributeValueMemberS{Value: key},
	}
}

// SetSynchronizedOn sets the metadata's synchronizedOn (unix milliseconds) with an UpdateItem,
// as the Relay Proxy does after every synchronization.
func (l ldDynamoLayout) SetSynchronizedOn(ctx context.Context, ms int64) error {
	meta := l.metadataKey()
	_, err := l.c.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
		TableName:                 &l.table,
		Key:                       itemKey(meta, meta),
		UpdateExpression:          aws.String("SET #s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "synchronizedOn"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberN{Value: strconv.FormatInt(ms, 10)}},
	})
	if err != nil {
		return fmt.Errorf("set synchronizedOn: %w", err)
	}
	return nil
}

// SetSynchronizedNow marks the data as synchronized now.
func (l ldDynamoLayout) SetSynchronizedNow(ctx context.Context) error {
	return l.SetSynchronizedOn(ctx, time.Now().UnixMilli())
}

// SetMembership adds segment refs to a context hash's included and excluded sets as the Relay
// Proxy applies a patch: a TransactWriteItems of a ConditionCheck that the metadata's
// lastVersion is still the one read (or absent), and an Update that ADDs to the string sets;
// then an UpdateItem that sets lastVersion to the next version.
func (l ldDynamoLayout) SetMembership(ctx context.Context, hash string, included, excluded []string) error {
	meta := l.metadataKey()
	got, err := l.c.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: &l.table, Key: itemKey(meta, meta), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("read lastVersion: %w", err)
	}
	check := &types.ConditionCheck{
		TableName:                &l.table,
		Key:                      itemKey(meta, meta),
		ConditionExpression:      aws.String("attribute_not_exists(#v)"),
		ExpressionAttributeNames: map[string]string{"#v": "lastVersion"},
	}
	next := "1"
	if v, ok := got.Item["lastVersion"].(*types.AttributeValueMemberS); ok {
		n, err := strconv.Atoi(v.Value)
		if err != nil {
			return fmt.Errorf("lastVersion %q is not one of this test's", v.Value)
		}
		check.ConditionExpression = aws.String("#v = :prev")
		check.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": v}
		next = strconv.Itoa(n + 1)
	}

	var adds []string
	names, values := map[string]string{}, map[string]types.AttributeValue{}
	for i, set := range []struct {
		attr string
		refs []string
	}{{"included", included}, {"excluded", excluded}} {
		if len(set.refs) == 0 {
			continue // a set cannot be empty
		}
		n := strconv.Itoa(i)
		adds = append(adds, "#a"+n+" :r"+n)
		names["#a"+n] = set.attr
		values[":r"+n] = &types.AttributeValueMemberSS{Value: set.refs}
	}
	if len(adds) == 0 {
		return nil // nothing to write
	}
	_, err = l.c.TransactWriteItems(ctx, &awsdynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{ConditionCheck: check},
		{Update: &types.Update{
			TableName:                 &l.table,
			Key:                       itemKey(l.userNamespace(), hash),
			UpdateExpression:          aws.String("ADD " + strings.Join(adds, ", ")),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
		}},
	}})
	if err != nil {
		return fmt.Errorf("patch: %w", err)
	}
	_, err = l.c.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
		TableName:                 &l.table,
		Key:                       itemKey(meta, meta),
		UpdateExpression:          aws.String("SET #v = :v"),
		ExpressionAttributeNames:  map[string]string{"#v": "lastVersion"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: next}},
	})
	if err != nil {
		return fmt.Errorf("set lastVersion: %w", err)
	}
	return nil
}

// Clear deletes every context item and the metadata item under the prefix.
func (l ldDynamoLayout) Clear(ctx context.Context) error {
	keys := []map[string]types.AttributeValue{itemKey(l.metadataKey(), l.metadataKey())}
	pages := awsdynamodb.NewQueryPaginator(l.c, &awsdynamodb.QueryInput{
		TableName:                 &l.table,
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#n = :n"),
		ProjectionExpression:      aws.String("#n, #k"),
		ExpressionAttributeNames:  map[string]string{"#n": "namespace", "#k": "key"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberS{Value: l.userNamespace()}},
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("query %s: %w", l.userNamespace(), err)
		}
		keys = append(keys, page.Items...)
	}
	for _, key := range keys {
		if _, err := l.c.DeleteItem(ctx, &awsdynamodb.DeleteItemInput{TableName: &l.table, Key: key}); err != nil {
			return fmt.Errorf("delete item: %w", err)
		}
	}
	return nil
}
