// Upstream files the contract tests read from pinned Go modules (tests/support/go_modules.py):
// nothing is built or imported; `go mod download` fetches each module at the version below into
// Go's module cache and checks it against go.sum.
module gpu-platform/upstream-modules

go 1.26

// The Prometheus Operator's CRDs (example/prometheus-operator-crd/) at the tag
// components/metrics/objects.py PROMETHEUS_OPERATOR_TAG names.
require github.com/prometheus-operator/prometheus-operator v0.93.0
