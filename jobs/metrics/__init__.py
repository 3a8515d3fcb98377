"""Training metrics: the in-job client (portal_metrics.py), ingestion, storage, downsampling."""
