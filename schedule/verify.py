"""The loop IR's verifier (``verify``, ``IRVerifyError``); it lives in ``schedule.passes.verify``."""
from .passes.verify import IRVerifyError, verify

__all__ = ["IRVerifyError", "verify"]
