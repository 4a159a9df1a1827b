"""vyre.cli — the `vyre` command (typer + rich): demo, inspect, backends, doctor, conform,
bench. Sits on top of every other layer."""
