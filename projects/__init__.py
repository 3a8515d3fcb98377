"""Projects from the scheduler's accounts, roles and who sees what."""
