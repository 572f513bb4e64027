"""Integration tests: real Docker, kind and the Pulumi CLI (opt-in)."""
