#!/usr/bin/env bash
# Upstream's own kube-scheduler benchmark, test/integration/scheduler_perf of k8s.io/kubernetes at
# the version testbed/go.mod pins, run on this machine, so its CI thresholds (pods/s) can be read
# against what this machine gives:
#
#   benchmarks/upstream_scheduler_perf.sh                                  # SchedulingBasic/5000Nodes_10000Pods
#   benchmarks/upstream_scheduler_perf.sh 'SchedulingBasic/500Nodes$'      # another case (a -bench pattern)
#
# The test runs kube-apiserver and kube-scheduler in its own process against an etcd binary it
# starts itself (upstream's integration framework looks for `etcd` on PATH): testbed/build's.
# It is built in a scratch module beside the test bed's binaries (~/.cache/rulesched/, outside
# the tree), whose go.mod is testbed/go.mod's with the test's own dependencies added; the test
# reads its configuration from the module cache (read-only) and writes its results
# (BenchmarkPerfScheduling_*.json: SchedulingThroughput average, percentiles) under
# ~/.cache/rulesched/scheduler-perf-VERSION/results/. Prints the benchmark's own lines.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bench=${1:-SchedulingBasic/5000Nodes_10000Pods$}
bin=$("$here/testbed/build")
version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$here/testbed/go.mod")
cache=${RULESCHED_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rulesched}
work="$cache/scheduler-perf-$version"
mkdir -p "$work/results"
sed 's|^module .*|module rulesched.test/schedulerperf|' "$here/testbed/go.mod" > "$work/go.mod"
cp "$here/testbed/go.sum" "$work/go.sum"
cd "$work"
export PATH="$bin:$PATH"   # etcd for the integration framework
pkg=k8s.io/kubernetes/test/integration/scheduler_perf/misc
# -mod=mod: the test's own dependencies (not the test bed's) are added to the scratch go.mod.
GOFLAGS=-mod=mod nice -n "${RULESCHED_BUILD_NICE:-10}" go test -c -o "$work/misc.test" "$pkg"
cd "$(go list -mod=mod -f '{{.Dir}}' "$pkg")"
ARTIFACTS="$work/results" "$work/misc.test" -test.run='^$' -test.bench="BenchmarkPerfScheduling/$bench" \
    -test.benchtime=1x -test.timeout=2h -perf-scheduling-label-filter= -data-items-dir="$work/results" \
    -logging-format=text -v=0 2>&1 | grep -v '^[IWE][0-9]\{4\} ' || true
ls -t "$work/results"/*.json 2>/dev/null | head -3
