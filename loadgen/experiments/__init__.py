"""Experiments on top of single runs: plans, their expansion and validation, execution, launched engines."""

from __future__ import annotations
