"""The job API (/api/v1/): serializers and views. Its addresses are assembled with the
other apps' on the top floor (portal/api_urls.py); token authentication is
identity/token_auth.py, the one error format common/api_errors.py, the metric endpoints
metrics/views.py."""
