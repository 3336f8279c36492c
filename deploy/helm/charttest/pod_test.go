package charttest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// imageFiles maps directories the image has to where they are in the repository (the
// Dockerfile's COPY lines; TestImageFilesMatchDockerfile keeps the two equal).
var imageFiles = map[string]string{"/examples/": "examples/"}

// runPod starts the real server the way kubelet would start the rendered container: the
// ConfigMap and env variables, GOMAXPROCS from the downward API, the Secrets as files (test
// certificates, passwords and tokens), listeners on loopback. Then it probes it the way
// kubelet does (no client certificate, no verification) on the listener each probe's port
// designates, pings the Redis-protocol listener as an SDK's Redis client would, and scrapes
// it where the ServiceMonitor would, for the series of every rendered environment. It
// returns what went wrong.
func runPod(t *testing.T, r *release, f *facts) []string {
	t.Helper()
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	env := map[string]string{}
	for name, v := range r.env() {
		if v.from == nil {
			env[name] = v.value
			continue
		}
		if v.from.SecretKeyRef != nil && name == otelHeaders { // a test Secret's value, as kubelet would put it
			env[name] = "authorization=Bearer%20charttest"
			continue
		}
		val, err := downwardValue(r, v.from)
		if err != nil {
			bad("%s: %v", name, err)
			continue
		}
		env[name] = val
	}

	// Files: the mounted Secrets, then the image's own.
	root := t.TempDir()
	mounts := map[string]bool{}
	for _, m := range r.container().VolumeMounts {
		mounts[strings.TrimSuffix(m.MountPath, "/")+"/"] = true
	}
	for name, val := range env {
		if !strings.HasPrefix(val, "/") {
			continue
		}
		if mapped, ok := imagePath(f, val); ok {
			env[name] = mapped
			continue
		}
		mounted := false
		for dir := range mounts {
			mounted = mounted || strings.HasPrefix(val, dir)
		}
		if !mounted {
			continue // a path the server may create or ignore; checkSecrets judges _FILE ones
		}
		content, err := secretContent(name)
		if err != nil {
			bad("%v", err)
			continue
		}
		p := filepath.Join(root, val)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
		env[name] = p
	}

	ports := map[string]string{} // container port name -> "api", "metrics" or "resp"
	for _, p := range r.container().Ports {
		for listener, v := range map[string]string{"api": "BIGSEG_ADDR", "metrics": "BIGSEG_METRICS_ADDR", "resp": "BIGSEG_RESP_ADDR"} {
			if _, port, err := net.SplitHostPort(env[v]); err == nil && port == strconv.Itoa(int(p.ContainerPort)) {
				ports[p.Name] = listener
			}
		}
	}
	// The listeners' addresses are read from the server's info log.
	if l := env["BIGSEG_LOG_LEVEL"]; l == "warn" || l == "error" {
		env["BIGSEG_LOG_LEVEL"] = "info"
	}
	env["BIGSEG_ADDR"] = "127.0.0.1:0"
	env["BIGSEG_METRICS_ADDR"] = "127.0.0.1:0"
	if env["BIGSEG_RESP_ADDR"] != "" {
		env["BIGSEG_RESP_ADDR"] = "127.0.0.1:0"
	}

	srv, err := startServer(t, f, env)
	if err != nil {
		return append(problems, err.Error())
	}
	listeners := map[string]string{"api": srv.addr, "metrics": srv.metricsAddr, "resp": srv.respAddr}

	// An SDK's Redis client: TLS verified against the test CA, with a client certificate
	// under mutual TLS, through the container port the Redis-protocol listener is on.
	if env["BIGSEG_RESP_ADDR"] != "" {
		reached := false
		for name, listener := range ports {
			if listener != "resp" {
				continue
			}
			reached = true
			if err := pingRESP(listeners[listener], env["BIGSEG_TLS_CERT_FILE"] != "", env["BIGSEG_TLS_CLIENT_CA_FILE"] != ""); err != nil {
				bad("Redis-protocol listener (container port %s): %v", name, err)
			}
		}
		if !reached {
			bad("BIGSEG_RESP_ADDR is set, but no container port is the Redis-protocol listener's")
		}
	}

	// kubelet: HTTPS without verification, no client certificate, no redirects.
	client := &http.Client{
		Timeout:       5 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	scheme := strings.ToLower
	for _, pr := range []struct {
		kind  string
		probe *corev1.Probe
		body  func(code int, body map[string]any) error
	}{
		{"liveness", r.container().LivenessProbe, func(code int, body map[string]any) error {
			if code != http.StatusOK || body["status"] != "ok" {
				return fmt.Errorf(`want 200 {"status":"ok"} (/livez), got %d %v`, code, body)
			}
			return nil
		}},
		{"readiness", r.container().ReadinessProbe, func(code int, body map[string]any) error {
			// No Redis answers here: 503 {"ready":false,...} is the right answer then.
			if _, ok := body["ready"].(bool); !ok || (code != http.StatusOK && code != http.StatusServiceUnavailable) {
				return fmt.Errorf(`want 200 or 503 with {"ready":...} (/readyz), got %d %v`, code, body)
			}
			return nil
		}},
	} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			bad("%s probe: not an httpGet probe", pr.kind)
			continue
		}
		g := pr.probe.HTTPGet
		listener, ok := ports[g.Port.String()]
		if !ok {
			bad("%s probe: port %s is no container port the server listens on", pr.kind, g.Port.String())
			continue
		}
		url := scheme(string(g.Scheme)) + "://" + listeners[listener] + g.Path
		code, body, err := getJSON(client, url)
		if err != nil {
			bad("%s probe: GET %s: %v", pr.kind, url, err)
			continue
		}
		if err := pr.body(code, body); err != nil {
			bad("%s probe: GET %s: %v", pr.kind, url, err)
		}
	}

	// Scrape where Prometheus would.
	metricsScheme, metricsPath := "http", "/metrics"
	if env["BIGSEG_METRICS_TLS"] == "true" {
		metricsScheme = "https"
	}
	if r.serviceMonitor != nil && len(r.serviceMonitor.Spec.Endpoints) > 0 {
		ep := r.serviceMonitor.Spec.Endpoints[0]
		if ep.Scheme != nil {
			metricsScheme = ep.Scheme.String()
		}
		metricsPath = ep.Path
	}
	url := scheme(metricsScheme) + "://" + srv.metricsAddr + metricsPath
	resp, err := client.Get(url)
	if err != nil {
		return append(problems, fmt.Sprintf("scrape %s: %v", url, err))
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(text), "\nbigseg_ready ") {
		return append(problems, fmt.Sprintf("scrape %s: %s, without bigseg_ready", url, resp.Status))
	}
	for _, name := range environmentNames(env["BIGSEG_ENVIRONMENTS"]) {
		if !regexp.MustCompile(`(?m)^bigseg_store_available\{[^}]*environment="` + regexp.QuoteMeta(name) + `"`).Match(text) {
			bad("environment %s: the server exports no bigseg_store_available{environment=%q}", name, name)
		}
	}
	if on := strings.Contains(string(text), "\nbigseg_resp_open_connections "); on != (env["BIGSEG_RESP_ADDR"] != "") {
		bad("BIGSEG_RESP_ADDR=%q, but bigseg_resp_open_connections exported: %v", env["BIGSEG_RESP_ADDR"], on)
	}
	if v, ok := env["GOMEMLIMIT"]; ok {
		want, err := goMemLimitBytes(v)
		if err != nil {
			bad("GOMEMLIMIT=%q: %v", v, err)
		} else if got := metricValue(string(text), "go_gc_gomemlimit_bytes"); got != float64(want) {
			bad("GOMEMLIMIT=%q: the server's runtime reports go_gc_gomemlimit_bytes %v, want %d", v, got, want)
		}
	}
	if v, ok := env["GOMAXPROCS"]; ok {
		if got := metricValue(string(text), "go_sched_gomaxprocs_threads"); strconv.FormatFloat(got, 'f', -1, 64) != v {
			bad("GOMAXPROCS=%q: the server's runtime reports go_sched_gomaxprocs_threads %v", v, got)
		}
	}
	return problems
}

// environmentNames are the names of BIGSEG_ENVIRONMENTS's name=prefix pairs; without it, the
// one environment of BIGSEG_PREFIX, named default.
func environmentNames(setting string) []string {
	if setting == "" {
		return []string{"default"}
	}
	var names []string
	for pair := range strings.SplitSeq(setting, ",") {
		name, _, _ := strings.Cut(pair, "=")
		names = append(names, name)
	}
	return names
}

// pingRESP sends PING to the Redis-protocol listener at addr as a Redis client does (an array
// of bulk strings) and wants +PONG: over TLS verified against the test CA when withTLS, with
// the test certificate as the client's when clientCert.
func pingRESP(addr string, withTLS, clientCert bool) error {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	var conn net.Conn
	var err error
	if withTLS {
		p := testPKI()
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(p.caPEM)
		cfg := &tls.Config{RootCAs: roots}
		if clientCert {
			pair, err := tls.X509KeyPair(p.certPEM, p.keyPEM)
			if err != nil {
				return err
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		conn, err = tls.DialWithDialer(dialer, "tcp", addr, cfg)
	} else {
		conn, err = dialer.Dial("tcp", addr)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		return fmt.Errorf("send PING: %w", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("PING: %w (after %q)", err, line)
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q, want +PONG", line)
	}
	return nil
}

// imagePath maps a path inside the image to the repository file the Dockerfile copies there.
func imagePath(f *facts, p string) (string, bool) {
	for inImage, inRepo := range imageFiles {
		if rest, ok := strings.CutPrefix(p, inImage); ok {
			return filepath.Join(f.repoRoot, inRepo, rest), true
		}
	}
	return "", false
}

// downwardValue is what kubelet puts in a variable with valueFrom: for resourceFieldRef, the
// container's request or limit divided by the divisor, rounded up
// (k8s.io/kubernetes/pkg/api/v1/resource ExtractContainerResourceValue).
func downwardValue(r *release, from *corev1.EnvVarSource) (string, error) {
	ref := from.ResourceFieldRef
	if ref == nil {
		return "", fmt.Errorf("valueFrom other than resourceFieldRef: %+v", from)
	}
	c := r.container()
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		return "", fmt.Errorf("resourceFieldRef names container %q, not %q", ref.ContainerName, c.Name)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	var q resource.Quantity
	var ok bool
	switch ref.Resource {
	case "limits.cpu":
		q, ok = c.Resources.Limits[corev1.ResourceCPU]
		if ok {
			return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
		}
	case "limits.memory":
		q, ok = c.Resources.Limits[corev1.ResourceMemory]
		if ok {
			return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
		}
	default:
		return "", fmt.Errorf("resourceFieldRef %s: not simulated here", ref.Resource)
	}
	return "", fmt.Errorf("resourceFieldRef %s: the container has no such limit, so kubelet would give the node's capacity", ref.Resource)
}

var goMemLimitRE = regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB|TiB)?$`)

// goMemLimitBytes reads GOMEMLIMIT as the Go runtime does (whole numbers only).
func goMemLimitBytes(s string) (int64, error) {
	m := goMemLimitRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("not a GOMEMLIMIT the chart should write (a whole number with B, KiB, MiB, GiB or TiB)")
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, err
	}
	return n << map[string]int{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]], nil
}

// metricValue is the value of an unlabelled metric in Prometheus text format, or NaN.
func metricValue(text, name string) float64 {
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
				return v
			}
		}
	}
	return math.NaN()
}

func getJSON(client *http.Client, url string) (int, map[string]any, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var body map[string]any
	if resp.StatusCode != http.StatusNotFound {
		if err := json.Unmarshal(raw, &body); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s: body %q is not a JSON object", resp.Status, raw)
		}
	}
	return resp.StatusCode, body, nil
}

// runningServer is a server process started by startServer; the test's cleanup kills it.
type runningServer struct {
	addr, metricsAddr, respAddr string
}

// startServer starts the server binary with exactly env, and returns once it logs that it
// listens (its metrics and Redis-protocol listeners log first), or fails if it exits or stays
// silent for 30 s.
func startServer(t *testing.T, f *facts, env map[string]string) (*runningServer, error) {
	t.Helper()
	cmd := exec.Command(f.server)
	cmd.Env = []string{}
	for _, k := range sortedKeys(env) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	logDone := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-logDone // the log ends when the process does; only then may Wait close the pipe
		_ = cmd.Wait()
	})
	type line struct {
		Msg  string `json:"msg"`
		For  string `json:"for"`
		Addr string `json:"addr"`
	}
	ready := make(chan *runningServer, 1)
	var mu sync.Mutex
	var log strings.Builder
	go func() {
		defer close(logDone)
		srv := &runningServer{}
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			var l line
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch {
			case l.Msg == "side listener" && l.For == "metrics":
				srv.metricsAddr = l.Addr
			case l.Msg == "Redis-protocol listener":
				srv.respAddr = l.Addr
			case l.Msg == "listening":
				srv.addr = l.Addr
				ready <- srv
			}
		}
		close(ready)
	}()
	logText := func() string {
		mu.Lock()
		defer mu.Unlock()
		return log.String()
	}
	select {
	case srv, ok := <-ready:
		if !ok {
			return nil, fmt.Errorf("the server exited with the rendered environment %q:\n%s", cmd.Env, logText())
		}
		if srv.metricsAddr == "" {
			return nil, fmt.Errorf("the server started no metrics listener:\n%s", logText())
		}
		if env["BIGSEG_RESP_ADDR"] != "" && srv.respAddr == "" {
			return nil, fmt.Errorf("the server logged no Redis-protocol listener with BIGSEG_RESP_ADDR set:\n%s", logText())
		}
		return srv, nil
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("the server did not log that it listens within 30s:\n%s", logText())
	}
}

// secretContent is what a test puts in the file a *_FILE setting names.
func secretContent(name string) ([]byte, error) {
	p := testPKI()
	switch {
	case strings.HasSuffix(name, "_CA_FILE"):
		return p.caPEM, nil
	case strings.HasSuffix(name, "_CERT_FILE"):
		return p.certPEM, nil
	case strings.HasSuffix(name, "_KEY_FILE"):
		return p.keyPEM, nil
	case strings.HasSuffix(name, "PASSWORD_FILE"):
		return []byte("not-a-real-password\n"), nil
	case strings.HasSuffix(name, "TOKENS_FILE"):
		return []byte("# test tokens\ntoken-1\n"), nil
	}
	return nil, fmt.Errorf("%s names a mounted file this test has no content for", name)
}

type pki struct{ caPEM, certPEM, keyPEM []byte }

// testPKI is a CA and a certificate it signed for 127.0.0.1 and localhost, usable as a
// server or client certificate.
var testPKI = sync.OnceValue(func() pki {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "charttest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "bigseg"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	caCert, _ := x509.ParseCertificate(caDER)
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		panic(err)
	}
	return pki{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
})

func TestImageFilesMatchDockerfile(t *testing.T) {
	f := getFacts(t)
	dockerfile, err := os.ReadFile(filepath.Join(f.repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for inImage, inRepo := range imageFiles {
		dirs = append(dirs, inImage)
		line := "COPY " + strings.TrimSuffix(inRepo, "/") + " " + strings.TrimSuffix(inImage, "/")
		if !strings.Contains(string(dockerfile), "\n"+line+"\n") {
			t.Errorf("the Dockerfile has no %q line: the image does not have %s", line, inImage)
		}
	}
	sort.Strings(dirs)
	t.Logf("image directories the tests map: %v", dirs)
}
