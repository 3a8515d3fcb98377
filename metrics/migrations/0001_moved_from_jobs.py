"""Metrics become their own app (metrics). The tables stay where they are, with
their rows: only Django's record of which app owns them changes (state operations), and
the content types follow so that permissions granted on them are kept."""

import django.db.models.deletion
from django.db import migrations, models

MODELS = ("metricseries", "metricpoint", "metricfile")


def _relabel(apps, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    if not ContentType.objects.filter(app_label=new, model__in=MODELS).exists():
        ContentType.objects.filter(app_label=old, model__in=MODELS).update(app_label=new)


def move_content_types(apps, schema_editor) -> None:
    _relabel(apps, "jobs", "metrics")


def move_content_types_back(apps, schema_editor) -> None:
    _relabel(apps, "metrics", "jobs")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("jobs", "0013_tensorboard_sessions"),
    ]

    operations = [
        migrations.RunPython(move_content_types, move_content_types_back),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="MetricSeries",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("key", models.CharField(max_length=100)),
                        ("rank", models.PositiveIntegerField(default=0)),
                        (
                            "attempt",
                            models.PositiveIntegerField(
                                default=0,
                                help_text="Slurm's restart count: a requeued job logs a new attempt.",
                            ),
                        ),
                        (
                            "system",
                            models.BooleanField(
                                default=False, help_text="CPU/GPU/memory sampled by the client."
                            ),
                        ),
                        ("node", models.CharField(blank=True, max_length=253)),
                        ("points", models.PositiveBigIntegerField(default=0)),
                        ("last_step", models.BigIntegerField(blank=True, null=True)),
                        ("last_value", models.FloatField(blank=True, null=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "job",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="metric_series",
                                to="jobs.job",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "jobs_metricseries",
                        "ordering": ["system", "key", "rank", "attempt"],
                    },
                ),
                migrations.CreateModel(
                    name="MetricPoint",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "series",
                                "seq",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("seq", models.BigIntegerField()),
                        ("step", models.BigIntegerField()),
                        ("value", models.FloatField()),
                        ("time", models.FloatField(help_text="Unix time the job logged it.")),
                        (
                            "series",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="metrics.metricseries",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "jobs_metricpoint",
                    },
                ),
                migrations.CreateModel(
                    name="MetricFile",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        ("offset", models.PositiveBigIntegerField(default=0)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "job",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="metric_files",
                                to="jobs.job",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "jobs_metricfile",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("job", "name"), name="metric_file_unique"
                            )
                        ],
                    },
                ),
                migrations.AddConstraint(
                    model_name="metricseries",
                    constraint=models.UniqueConstraint(
                        fields=("job", "key", "rank", "attempt"), name="metric_series_unique"
                    ),
                ),
                migrations.AddIndex(
                    model_name="metricpoint",
                    index=models.Index(fields=["series", "step"], name="metric_point_step"),
                ),
            ]
        ),
    ]
