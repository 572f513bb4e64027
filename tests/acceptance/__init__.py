"""Acceptance suite: the lab report's tests against a deployed stack (see conftest.py)."""
