"""Reports: Markdown, charts and console tables."""
