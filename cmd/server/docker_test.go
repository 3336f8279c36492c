package main

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// No Docker engine runs in CI; these checks keep the Dockerfile and the compose file in step
// with the code. CI also builds the same static binary and runs its healthcheck.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, want := range []string{
		"CGO_ENABLED=0 go build", "./cmd/server", "USER nonroot", "EXPOSE 8080", "BIGSEG_ADDR=:8080",
		`HEALTHCHECK`, `CMD ["/server", "healthcheck"]`, `ENTRYPOINT ["/server"]`, "COPY examples /examples",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

func TestCompose(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Build       string
			Image       string
			Command     []string
			Environment map[string]string
			Volumes     []string
			DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
		}
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	s := compose.Services
	for _, name := range []string{"redis", "load", "bigseg", "prometheus"} {
		if _, ok := s[name]; !ok {
			t.Errorf("no service %q", name)
		}
	}
	if c := s["load"].Command; len(c) != 2 || c[0] != "load" || c[1] != "/examples/memberships.json" {
		t.Errorf("load command = %q", c)
	}
	if _, err := os.Stat("../../examples/memberships.json"); err != nil {
		t.Error(err)
	}
	if s["bigseg"].DependsOn["load"].Condition != "service_completed_successfully" {
		t.Errorf("bigseg does not wait for the load: %+v", s["bigseg"].DependsOn)
	}
	for _, name := range []string{"load", "bigseg"} {
		if s[name].Environment["BIGSEG_REDIS_URL"] != "redis://redis:6379" {
			t.Errorf("%s: BIGSEG_REDIS_URL = %q", name, s[name].Environment["BIGSEG_REDIS_URL"])
		}
	}
	if v := s["prometheus"].Volumes; len(v) != 1 || !strings.HasPrefix(v[0], "./deploy/prometheus:/etc/prometheus") {
		t.Errorf("prometheus volumes = %q", v)
	}
	prom, _ := os.ReadFile("../../deploy/prometheus/prometheus.yml")
	if !strings.Contains(string(prom), `"bigseg:8080"`) {
		t.Error("deploy/prometheus/prometheus.yml does not scrape bigseg:8080, the compose service")
	}
}
