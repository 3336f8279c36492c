#!/usr/bin/env bash
# CI for the Helm chart (deploy/helm/bigseg), no cluster needed: installs helm if it is
# missing, checks the test module (gofmt, go vet, go mod tidy), then runs its tests, which
# lint and render the chart over testdata/values, decode every object strictly, check it
# against the server's own facts and run the real server with each rendered pod's settings.
set -euo pipefail
cd "$(dirname "$0")/charttest"
export PATH="$PATH:/usr/local/go/bin"
export PATH="$PATH:$(go env GOPATH)/bin"

HELM_VERSION=v3.22.0
if ! command -v helm >/dev/null; then
  echo "== installing helm $HELM_VERSION"
  go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi
echo "helm $(helm version --short)"

echo "== gofmt, go vet, go mod tidy (deploy/helm/charttest)"
unformatted=$(gofmt -l .)
[ -z "$unformatted" ] || { echo "gofmt would change: $unformatted"; exit 1; }
go vet ./...
go mod tidy -diff

echo "== chart tests"
go test -count=1 ./...
