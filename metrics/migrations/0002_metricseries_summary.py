"""Per-series summaries for comparisons (metrics/summary.py), built for stored series."""

from django.db import migrations, models


def build(apps, schema_editor):
    from metrics.summary import rebuild

    series = apps.get_model("metrics", "MetricSeries")
    for pk in series.objects.values_list("pk", flat=True).iterator():
        series.objects.filter(pk=pk).update(summary=rebuild(pk))


class Migration(migrations.Migration):
    dependencies = [("metrics", "0001_moved_from_jobs")]

    operations = [
        migrations.AddField(
            model_name="metricseries",
            name="summary",
            field=models.BinaryField(
                editable=False,
                help_text="The series in 64 step buckets (metrics/summary.py), for comparisons.",
                null=True,
            ),
        ),
        migrations.RunPython(build, migrations.RunPython.noop),
    ]
