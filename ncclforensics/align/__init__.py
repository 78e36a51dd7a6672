"""Pure analysis over the event model: no I/O, no printing. `diagnose` is the entry point."""
