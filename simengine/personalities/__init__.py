"""Engine personalities: one module per engine (registry.py maps --personality names to them;
catalog.py holds their names and start-up defaults as plain data)."""
