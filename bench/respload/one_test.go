package main

import "github.com/bigseg/bigseg/segments"

// oneService is the service of one environment, named default, over store.
func oneService(store segments.Store, opts ...segments.Option) *segments.Service {
	svc, err := segments.New([]segments.Environment{{Name: "default", Prefix: "launchdarkly", Store: store}}, opts...)
	if err != nil {
		panic(err)
	}
	return svc
}
