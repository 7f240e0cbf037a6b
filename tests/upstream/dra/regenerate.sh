#!/bin/sh
# Regenerates allocator_cases.jsonl: upstream's shared allocator test table
# (k8s.io/dynamic-resource-allocation structured/internal/allocatortesting at the version below),
# run against the allocator variant kube-scheduler 1.37 picks with its default feature gates
# ("incubating": AdminAccess, PrioritizedList, PartitionableDevices, DeviceTaints,
# DeviceBindingAndStatus, ConsumableCapacity, FractionalCapacityRange), each case written with
# its inputs, what upstream's allocator returned and whether upstream's own assertions passed.
# Needs Go and the module proxy; never run by the tests or CI (the .jsonl is committed).
set -eu
VERSION=v0.37.2
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${TMPDIR:-/tmp}/rulesched-dra-cases
GOMODCACHE=$(go env GOMODCACHE)
go mod download "k8s.io/dynamic-resource-allocation@$VERSION"
rm -rf "$WORK" && mkdir -p "$WORK"
cp -r "$GOMODCACHE/k8s.io/dynamic-resource-allocation@$VERSION" "$WORK/dra" && chmod -R u+w "$WORK/dra"
T="$WORK/dra/structured/internal/allocatortesting"
cp "$HERE/dump_hook.go" "$T/"
python3 "$HERE/patch_table.py" "$T/allocator_testing.go"
(cd "$WORK/dra" && DRA_DUMP="$WORK/cases.json" go test ./structured/internal/incubating/ -run TestAllocator -count=1)
python3 "$HERE/to_jsonl.py" "$WORK/cases.json" "$T" "$VERSION" > "$HERE/allocator_cases.jsonl"
# The CEL table (cel/compile_test.go's testcases): dump_cel_cases_test.go, dropped beside it.
cp "$HERE/dump_cel_cases_test.go" "$WORK/dra/cel/"
(cd "$WORK/dra" && CEL_DUMP="$WORK/cel.json" go test ./cel/ -run TestDumpCases -count=1)
python3 - "$WORK/cel.json" "$VERSION" > "$HERE/cel_cases.jsonl" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))
print(json.dumps({"module": "k8s.io/dynamic-resource-allocation", "version": sys.argv[2], "table": "cel/compile_test.go testcases", "cases": len(cases)}))
for case in cases:
    print(json.dumps(case, sort_keys=True, separators=(",", ":")))
PY
