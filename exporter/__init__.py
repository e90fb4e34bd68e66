"""infergauge-exporter: GPU (NVML, dcgm-exporter names), engine launch parameters and host facts."""
