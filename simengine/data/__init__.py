"""Package data of the simulated engine (SGLang server-argument defaults)."""
