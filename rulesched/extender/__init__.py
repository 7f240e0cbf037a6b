"""``rulesched extender``: kube-scheduler calls the rules over HTTP (its extender protocol).

A thin face around the same core as ``rulesched run``: :mod:`.wire` turns kube-scheduler's JSON
into model values and answers back, :mod:`.service` evaluates the rules for each verb over a
store kept by the informer cache (:mod:`rulesched.mirror`) or filled from the requests (the bind
verb's checks and writes in :mod:`.binding`), and :mod:`.server` serves the verbs, probes and
metrics over HTTP(S), each connection behind a header deadline (:mod:`.connections`);
:mod:`.cli` builds the settings.
"""
