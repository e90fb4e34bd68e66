"""Continuous baselines: suites of named series, passes written to the store, change points explained."""
