"""Seeded workloads: length distributions, request generators and the send schedule."""
