"""One benchmark run: prepare, measure (send and stamp), record; live metrics and progress."""
