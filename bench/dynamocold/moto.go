package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// moto is a moto_server process on a free loopback port (bench/sdkdynamo's, which is in a
// module of its own; internal/dynamotest's start-up is for tests).
type moto struct {
	url    string // http://127.0.0.1:PORT
	cmd    *exec.Cmd
	exited chan struct{}
}

var listening = regexp.MustCompile(`Running on (http://127\.0\.0\.1:[0-9]+)`)

// startMoto starts moto_server under wrapper (taskset and its arguments) on port 0, reads the
// port it logs, and returns once it answers a DynamoDB call.
func startMoto(wrapper ...string) (*moto, error) {
	path, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, errors.New("moto_server is not on PATH (pip install 'moto[server]')")
	}
	argv := append(append([]string{}, wrapper...), path, "-H", "127.0.0.1", "-p", "0")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	m := &moto{cmd: cmd, exited: make(chan struct{})}
	found := make(chan string, 1)
	go func() { // drains moto's log, a line a request, until it exits
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if sub := listening.FindStringSubmatch(sc.Text()); sub != nil {
				select {
				case found <- sub[1]:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(m.exited)
	}()
	select {
	case m.url = <-found:
	case <-m.exited:
		return nil, errors.New("moto_server exited before listening")
	case <-time.After(60 * time.Second):
		m.stop()
		return nil, errors.New("moto_server did not say where it listens")
	}
	c := newClient(m.url)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.ListTables(ctx, &awsdynamodb.ListTablesInput{})
		cancel()
		if err == nil {
			return m, nil
		}
		if time.Now().After(deadline) {
			m.stop()
			return nil, fmt.Errorf("moto_server at %s does not answer: %w", m.url, err)
		}
	}
}

// pid is moto_server's process (taskset execs it, and so does pyenv's shim).
func (m *moto) pid() int { return m.cmd.Process.Pid }

func (m *moto) stop() {
	select {
	case <-m.exited:
		return
	default:
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.exited
}

const region = "us-east-1"

func newClient(endpoint string) *awsdynamodb.Client {
	return awsdynamodb.New(awsdynamodb.Options{
		Region:       region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("bench", "bench", ""),
	})
}

// awsVars are the AWS SDK's own variables that point a server at endpoint and table, with
// fake credentials and no profile or instance role of this machine.
func awsVars(endpoint, table, dir string) []string {
	return []string{
		"BIGSEG_DYNAMODB_TABLE=" + table,
		"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint,
		"AWS_REGION=" + region,
		"AWS_ACCESS_KEY_ID=bench",
		"AWS_SECRET_ACCESS_KEY=bench",
		"AWS_SESSION_TOKEN=",
		"AWS_PROFILE=",
		"AWS_MAX_ATTEMPTS=",
		"AWS_CONFIG_FILE=" + dir + "/aws-none",
		"AWS_SHARED_CREDENTIALS_FILE=" + dir + "/aws-none",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// createTable creates a table of LaunchDarkly's layout with a name of its own.
func createTable(ctx context.Context, endpoint string) (string, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	table := "dynamocold-" + hex.EncodeToString(b[:])
	_, err := newClient(endpoint).CreateTable(ctx, &awsdynamodb.CreateTableInput{
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
		return "", fmt.Errorf("create table: %w", err)
	}
	return table, nil
}

// writeFixture writes n contexts user-0 ... of three refs each (bench/lib.sh's fixture).
func writeFixture(path string, n int) error {
	var b strings.Builder
	b.WriteString(`{"contexts": {`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"user-%d": {"included": ["beta-users.g3", "early-access.g2"], "excluded": ["blocked.g1"]}`, i)
	}
	b.WriteString("}}\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// load writes the fixture into the table with `server load`, bigseg's own writer.
func load(ctx context.Context, server, fixture string, env []string) error {
	cmd := exec.CommandContext(ctx, server, "load", fixture)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("server load: %w\n%s", err, out)
	}
	return nil
}
