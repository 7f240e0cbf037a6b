"""The front end: rules text -> parse (a tree with spans) -> check (names, types, annotations).

``files`` finds the texts (paths, or a ``{name: text}`` mapping) and follows ``extends``;
``source`` holds a text with its positions and the :class:`Diagnostic` it renders; ``parse``
builds the ``ast``; ``check`` resolves names and types against :mod:`rulesched.lang.schema` and the
built-ins' signatures; ``printer`` (laid out by ``layout``), ``format`` (with ``comments``, where
each comment belongs) and ``lint`` (with ``resource_fit``, the ``no-resource-fit`` warning) are
the tools made of these.
Nothing here compiles or evaluates rules (an import-linter contract).
Next stage: :mod:`rulesched.lang.evaluation` compiles what ``check`` accepted.
"""
