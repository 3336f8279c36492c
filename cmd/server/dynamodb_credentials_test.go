package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/dynamotest"
	"github.com/bigseg/bigseg/segments"
)

// credentialsRecovery is the bound within which lookups must answer again once what made a
// fetch of credentials hang has gone: generous, for a busy machine; the time measured is
// logged.
const credentialsRecovery = 30 * time.Second

// untilAnswered asks for user-1 until it is answered right, and returns how long that took
// from since, failing the test past credentialsRecovery.
func untilAnswered(t *testing.T, p *process, since time.Time) time.Duration {
	t.Helper()
	for time.Since(since) < credentialsRecovery {
		statuses := batchAnswers(t, p.URL, 1, 1)
		if statuses[0] == "HEALTHY" {
			return time.Since(since)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not waiting for time to pass
	}
	t.Fatalf("lookups still fail %v after the cause of the hang has gone; logs:\n%s", credentialsRecovery, p.logs.all())
	return 0
}

// credentialsEnv are kv after settings that take the keys of dynamotest.Vars away: the
// credential chain finds credentials as kv say.
func credentialsEnv(kv ...string) []string {
	env := []string{"AWS_ACCESS_KEY_ID", "", "AWS_SECRET_ACCESS_KEY", ""}
	return append(env, kv...)
}

// TestDynamoDBHungWebIdentity: STS, asked for the web identity's credentials (as on EKS with
// IRSA), accepts the call and never answers; once it answers again, lookups are answered
// within a fetch's bound (5 s), though the first call never ends.
func TestDynamoDBHungWebIdentity(t *testing.T) {
	t.Parallel() // most of it waits for the fetch of credentials: little of moto_server
	c, table := dynamoTable(t)
	relayWrite(t, c, table, "", "", "v1", dynamotest.Change{Hash: segments.Hash("user-1"), AddIncluded: []string{faultRef(1)}})
	sts := dynamotest.NewProxy(t, dynamotest.Shared(t).URL)
	sts.On("AssumeRoleWithWebIdentity", func(int, func() dynamotest.Reply) dynamotest.Reply { return dynamotest.Reply{Hang: true} })
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("bigsegtest-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := dynamoProcess(t, dynamotest.Shared(t).URL, table, credentialsEnv(
		"AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/bigsegtest",
		"AWS_WEB_IDENTITY_TOKEN_FILE", token,
		"AWS_ROLE_SESSION_NAME", "bigsegtest",
		"AWS_ENDPOINT_URL_STS", sts.URL)...)
	waitFor(t, "a call to STS", func() bool { return sts.Calls("AssumeRoleWithWebIdentity") > 0 })
	if s := batchAnswers(t, p.URL, 1, 1)[0]; s != "STORE_ERROR" {
		t.Fatalf("lookup while STS hangs: %s", s)
	}
	sts.On("AssumeRoleWithWebIdentity", nil)
	d := untilAnswered(t, p, time.Now())
	t.Logf("answered %v after STS answers again (%d calls to STS)", d.Round(10*time.Millisecond), sts.Calls("AssumeRoleWithWebIdentity"))
}

// TestDynamoDBHungCredentialProcess: a credential_process that hangs, its child holding its
// output open (so that killing the process does not end the wait for its output); once it
// answers again, lookups are answered within a fetch's bound (5 s), though the hung child
// lives on.
func TestDynamoDBHungCredentialProcess(t *testing.T) {
	t.Parallel() // most of it waits for the fetch of credentials: little of moto_server
	c, table := dynamoTable(t)
	relayWrite(t, c, table, "", "", "v1", dynamotest.Change{Hash: segments.Hash("user-1"), AddIncluded: []string{faultRef(1)}})
	dir := t.TempDir()
	hang, pids, calls := filepath.Join(dir, "hang"), filepath.Join(dir, "pids"), filepath.Join(dir, "calls")
	script := filepath.Join(dir, "credentials")
	err := os.WriteFile(script, []byte(`#!/bin/sh
echo >> "`+calls+`"
if [ -e "`+hang+`" ]; then
	sleep 600 &
	echo $! >> "`+pids+`"
	wait
fi
echo '{"Version": 1, "AccessKeyId": "bigsegtest", "SecretAccessKey": "bigsegtest"}'
`), 0o700)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hang, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the hung children, by the ids they wrote
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte("[default]\ncredential_process = "+script+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := dynamoProcess(t, dynamotest.Shared(t).URL, table, credentialsEnv("AWS_CONFIG_FILE", config)...)
	waitFor(t, "a hung credential_process", func() bool { b, _ := os.ReadFile(pids); return len(b) > 0 })
	if s := batchAnswers(t, p.URL, 1, 1)[0]; s != "STORE_ERROR" {
		t.Fatalf("lookup while the credential_process hangs: %s", s)
	}
	if err := os.Remove(hang); err != nil {
		t.Fatal(err)
	}
	d := untilAnswered(t, p, time.Now())
	b, _ := os.ReadFile(calls)
	t.Logf("answered %v after the credential_process answers again (%d runs)", d.Round(10*time.Millisecond), strings.Count(string(b), "\n"))
}

// TestDynamoDBHungContainerCredentials: the container credentials endpoint (ECS task roles,
// EKS Pod Identity) accepts the call and never answers; once it answers again, lookups are
// answered within a fetch's bound (5 s).
func TestDynamoDBHungContainerCredentials(t *testing.T) {
	t.Parallel() // most of it waits for the fetch of credentials: little of moto_server
	c, table := dynamoTable(t)
	relayWrite(t, c, table, "", "", "v1", dynamotest.Change{Hash: segments.Hash("user-1"), AddIncluded: []string{faultRef(1)}})
	var hung atomic.Bool
	hung.Store(true)
	var calls atomic.Int64
	done := make(chan struct{})
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if hung.Load() {
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		_, _ = w.Write([]byte(`{"AccessKeyId":"bigsegtest","SecretAccessKey":"bigsegtest","Token":"bigsegtest","Expiration":"` +
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`))
	}))
	t.Cleanup(endpoint.Close)
	t.Cleanup(func() { close(done) })
	p := dynamoProcess(t, dynamotest.Shared(t).URL, table, credentialsEnv("AWS_CONTAINER_CREDENTIALS_FULL_URI", endpoint.URL+"/creds")...)
	waitFor(t, "a call to the endpoint", func() bool { return calls.Load() > 0 })
	if s := batchAnswers(t, p.URL, 1, 1)[0]; s != "STORE_ERROR" {
		t.Fatalf("lookup while the endpoint hangs: %s", s)
	}
	hung.Store(false)
	d := untilAnswered(t, p, time.Now())
	t.Logf("answered %v after the endpoint answers again (%d calls)", d.Round(10*time.Millisecond), calls.Load())
}
