"""NVML, the first GPU source: session, per-GPU readers, sampler, facts, topology, and a fake for tests."""
