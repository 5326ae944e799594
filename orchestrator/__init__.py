"""orch: distributed scaling experiment orchestrator for deep-learning training on CPU clusters."""

__version__ = "0.1.0"
