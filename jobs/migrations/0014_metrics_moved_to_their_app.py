"""The metric models moved to their own app (metrics, its 0001): Django forgets them
here without touching their tables."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0013_tensorboard_sessions"),
        ("metrics", "0001_moved_from_jobs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="metricpoint",
                    name="series",
                ),
                migrations.RemoveField(
                    model_name="metricseries",
                    name="job",
                ),
                migrations.DeleteModel(
                    name="MetricFile",
                ),
                migrations.DeleteModel(
                    name="MetricPoint",
                ),
                migrations.DeleteModel(
                    name="MetricSeries",
                ),
            ]
        ),
    ]
