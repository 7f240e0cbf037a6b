"""Tools a rules change goes through before it is rolled out: ``rulesched test`` (rule unit
tests in YAML next to the rules, :mod:`.ruletest`) and ``rulesched diff`` (two rule sets
simulated on one cluster, :mod:`.diff`)."""
