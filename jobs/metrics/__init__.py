"""Training metrics, a nested app: storage (models), ingestion (uploads and files read over
SSH), queries and downsampling, live updates (broadcast, consumers), endpoints (views) and
the SSH reading task. The in-job client is jobs/on_node/portal_metrics.py."""
