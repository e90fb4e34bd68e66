"""Experiments on top of single loadgen runs: sweeps, capacity search, plans, align, diff, reports."""

from __future__ import annotations
