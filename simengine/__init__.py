"""Simulated OpenAI-compatible inference engine that behaves like vLLM or SGLang (no GPU needed)."""
