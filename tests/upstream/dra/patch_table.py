"""Hooks dump_hook.go's recordCase/recordSkipped/writeDump into upstream's RunTestAllocator
(used by regenerate.sh on a copy of the module; fails loudly if upstream's text moved)."""

import sys

path = sys.argv[1]
text = open(path).read()
edits = [
    (
        "\t\t\tif missing.Len() > 0 {\n",
        "\t\t\tif missing.Len() > 0 {\n\t\t\t\trecordSkipped(t.Name(), name, tc, sets.List(missing))\n",
    ),
    (
        "\t\t\tresults, err := allocator.Allocate(ctx, tc.node, unwrap(claimsToAllocate...))\n",
        "\t\t\tresults, err := allocator.Allocate(ctx, tc.node, unwrap(claimsToAllocate...))\n"
        "\t\t\trecordCase(t, t.Name(), name, tc, results, err, allocator)\n",
    ),
    ("\t\t})\n\t}\n}\n\ntype informerLister", "\t\t})\n\t}\n\twriteDump(t)\n}\n\ntype informerLister"),
]
for old, new in edits:
    if text.count(old) != 1:
        sys.exit(f"{path}: expected one {old!r}")
    text = text.replace(old, new)
open(path, "w").write(text)
