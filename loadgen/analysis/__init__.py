"""Pure analysis over stored runs: diff, align, knee, capacity search, SLOs, costs, series."""
