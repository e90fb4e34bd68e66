"""Run records on disk: summary, manifest, the run folder and runs.csv, engine facts of live or stored runs."""
