package charttest

import (
	"testing"
)

// TestEnvironments: environments renders BIGSEG_ENVIRONMENTS as name=prefix pairs in the
// names' order; without it nothing changes (one environment, named default, of
// config.BIGSEG_PREFIX or the server's default prefix).
func TestEnvironments(t *testing.T) {
	for _, tc := range []struct {
		name, values         string
		environments, prefix string // "" for unset
	}{
		{"none", "{}", "", ""},
		{"the prefix as before", "config: {BIGSEG_PREFIX: ld-prod}", "", "ld-prod"},
		{"an empty map", "environments: {}\nconfig: {BIGSEG_PREFIX: ld-prod}", "", "ld-prod"},
		{"one", "environments: {production: ld-prod}", "production=ld-prod", ""},
		{"several in the names' order", "redis: {url: 'redis://r:6379'}\nenvironments: {staging: ld-staging, production: ld-prod, 0-qa_eu: ld-qa}",
			"0-qa_eu=ld-qa,production=ld-prod,staging=ld-staging", ""},
		{"prefixes with colons and =", "redis: {url: 'redis://r:6379'}\nenvironments: {a: 'ld:a', b: 'ld=b'}", "a=ld:a,b=ld=b", ""},
		{"several on DynamoDB", "redis: {url: ''}\ndynamodb: {table: ld}\nenvironments: {staging: ld-staging, production: ld-prod}", "production=ld-prod,staging=ld-staging", ""},
		{"an override removes one with null", "environments: {production: ld-prod, staging: null}", "production=ld-prod", ""},
		{"a null BIGSEG_PREFIX beside them", "environments: {production: ld-prod}\nconfig: {BIGSEG_PREFIX: null}", "production=ld-prod", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := render(t, withStore(t, tc.values)...).env()
			for name, want := range map[string]string{"BIGSEG_ENVIRONMENTS": tc.environments, "BIGSEG_PREFIX": tc.prefix} {
				got, set := env[name]
				switch {
				case want == "" && set:
					t.Errorf("%s=%q, want it unset", name, got.value)
				case want != "" && got.value != want:
					t.Errorf("%s=%q, want %q", name, got.value, want)
				}
			}
		})
	}
	t.Run("with --set", func(t *testing.T) {
		out, err := template(t, nil, "--set", "redis.url=redis://r:6379", "--set", "environments.production=ld-prod", "--set", "environments.staging=ld-staging")
		if err != nil {
			t.Fatal(err)
		}
		r, err := decode(out)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := r.env()["BIGSEG_ENVIRONMENTS"].value, "production=ld-prod,staging=ld-staging"; got != want {
			t.Errorf("BIGSEG_ENVIRONMENTS=%q, want %q", got, want)
		}
	})
}
