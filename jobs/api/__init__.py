"""The REST API (/api/v1/): personal tokens, serializers, views."""
