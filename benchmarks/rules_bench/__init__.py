"""benchmarks/bench_rules.py's parts: ``cluster``, the synthetic cluster (nodes with running
pods, pending pods) and the label and annotation keys it uses; ``handwritten``, the hand-written
twin of benchmarks/rules/bench.rules (that of rules/default.rules is benchmarks/handwritten_default.py);
``cycles``, one pod's scheduling cycle per variant, timed phase by phase. The script is the one
command: it checks the twins agree, then measures."""
