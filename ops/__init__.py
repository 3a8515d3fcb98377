"""Running it as a service: /metrics, queue lengths, JSON logs, backups.

Running the portal as a centre's service: Prometheus metrics (``common.prometheus``, served
at ``/metrics`` by ``ops.views``).
"""
