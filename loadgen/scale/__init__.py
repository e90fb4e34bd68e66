"""Runs spread over processes on one host (`loadgen run --workers N`); above results, below cli."""
