"""Running the portal as a centre's service: Prometheus metrics (``ops.metrics``, served
at ``/metrics`` by ``ops.views``)."""
