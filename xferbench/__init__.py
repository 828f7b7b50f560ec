"""xferbench: the experiment runner."""
