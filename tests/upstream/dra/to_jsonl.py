"""Turns dump_hook.go's JSON into allocator_cases.jsonl: one case a line, sorted by name, each
with its source (file, function and line of the case in upstream's table)."""

import json
import re
import sys

dump, table_dir, version = sys.argv[1:4]
sources = {}
for file, function in (
    ("allocator_testing.go", "TestAllocator"),
    ("lexicographical_testing.go", "TestLexicographicalAllocator"),
):
    for number, line in enumerate(open(f"{table_dir}/{file}"), 1):
        m = re.match(r'\t\t"([^"]+)": \{', line)
        if m:
            sources.setdefault(m.group(1), f"structured/internal/allocatortesting/{file}:{number} ({function})")
cases = json.load(open(dump))
print(
    json.dumps(
        {
            "module": "k8s.io/dynamic-resource-allocation",
            "version": version,
            "variant": "incubating",
            "cases": len(cases),
        }
    )
)
for case in sorted(cases, key=lambda c: c["name"]):
    case.pop("table", None)
    case["source"] = sources.get(case["name"], "?")
    print(json.dumps(case, sort_keys=True, separators=(",", ":")))
