"""The Job and its lifecycle: launch, submit, sync, cancel, outbox, API."""
