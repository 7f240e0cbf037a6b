"""benchmarks/bench_kube_scheduler.py's parts: kube-scheduler 1.37 beside ``rulesched run`` on the
same real API server (testbed/). ``cluster``: the workloads and the pods' watch; ``processes``:
the schedulers and the test bed; ``creators``: how the measured pods are created; ``speed`` and
``fidelity``: the two comparisons. The script is the one command."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # benchmarks/
ROOT = HERE.parent
# gen_cluster (benchmarks/) and tests.realk8s (the project's root), as the script finds them
for _path in (str(ROOT), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)
