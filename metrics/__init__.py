"""Training metrics: ingest, storage, queries, live charts, comparisons.

Training metrics: storage (models), ingestion (uploads and files read over
SSH), queries and downsampling, live updates (broadcast, consumers), endpoints (views) and
a job's comparisons (compare/); files read over SSH are tracking/tail.py's. The in-job client is schedulers/on_node/portal_metrics.py.
"""
