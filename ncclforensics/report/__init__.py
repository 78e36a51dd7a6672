"""Rendering: JSON-ready dicts, rich terminal output, plots and written reports. Never computes findings."""
