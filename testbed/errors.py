"""The test bed's one error: a step failed, and its message says which and where its log is."""


class TestbedError(Exception):
    """A step failed; the message says which and where its log is."""
