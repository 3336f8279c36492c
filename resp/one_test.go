package resp_test

import "github.com/bigseg/bigseg/segments"

// oneService is the service of one environment, named default, over store, configured by
// cfg if given.
func oneService(store segments.Store, cfg ...segments.Config) *segments.Service {
	var c segments.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	svc, err := segments.New([]segments.Environment{{Name: "default", Prefix: "launchdarkly", Store: store}}, c)
	if err != nil {
		panic(err)
	}
	return svc
}
