"""Transports: raw HTTP/1.1 and aiohttp clients, read stamping, SSE parsing, dispatch at send times."""
