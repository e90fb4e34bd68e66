"""The results store: every run's row in SQLite (default) or PostgreSQL; run folders stay the truth."""
