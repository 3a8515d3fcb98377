"""The metric upload's request and answer, as the API schema documents them."""

from __future__ import annotations

from rest_framework import serializers


class MetricRecordSerializer(serializers.Serializer):
    """One metric record, for the schema. The endpoint validates batches with
    metrics.ingest.parse_batch (fast enough for 10,000 records per request)."""

    seq = serializers.IntegerField(min_value=0, help_text="Per rank and attempt, from 0.")
    time = serializers.FloatField(help_text="Unix time in seconds.")
    step = serializers.IntegerField(required=False, help_text="Defaults to seq.")
    metrics = serializers.DictField(child=serializers.FloatField(), help_text="name: number")
    rank = serializers.IntegerField(required=False, min_value=0)
    attempt = serializers.IntegerField(required=False, min_value=0)
    system = serializers.BooleanField(required=False)
    node = serializers.CharField(required=False)


class IngestResultSerializer(serializers.Serializer):
    inserted = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    rejected = serializers.ListField(child=serializers.CharField())
