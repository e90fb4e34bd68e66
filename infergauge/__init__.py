"""What every infergauge binary shares (standard library only): the engines as data, the secret policy."""
