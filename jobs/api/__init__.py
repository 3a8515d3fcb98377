"""The REST API (/api/v1/): URLs, token authentication, serializers, views, one error
format. Tokens are jobs.models.ApiToken; the metric endpoints are in jobs/metrics/views.py."""
