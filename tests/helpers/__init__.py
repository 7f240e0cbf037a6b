"""What test modules share: builders of objects and clusters, strategies' companions, profiles.

Test modules import shared helpers from here (or from tests.strategies, tests.apiserver,
tests.extender_client, tests.upstream.harness), never from another test module:
tests/test_quality.py checks it.
"""
