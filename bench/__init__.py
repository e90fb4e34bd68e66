"""Benchmarks of infergauge's own speed and accuracy (`make bench`); figures, not tests."""
