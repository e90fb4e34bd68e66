"""Run records on disk: summary, manifest (one schema), the run folder and runs.csv, engine facts."""
