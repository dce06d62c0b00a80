"""Models for ops: API tokens (filled in by the "Leader view" work)."""

__all__: list[str] = []
