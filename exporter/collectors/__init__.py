"""One collector per source: gpu (NVML), engine (processes + HTTP), host; base.CollectorSet runs them."""
