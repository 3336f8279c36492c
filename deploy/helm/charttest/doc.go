// Package charttest tests the Helm chart in ../bigseg without a cluster: it renders the chart
// with helm over the values files in testdata/values, decodes every object strictly into the
// Kubernetes and prometheus-operator API types, checks them against bigseg's own facts (the
// settings `server -h` lists, the routes the real server answers, deploy/prometheus and
// deploy/grafana), and runs the real server with each rendered pod's environment.
//
// It is a module of its own so that the Kubernetes packages never enter bigseg's go.mod.
package charttest
