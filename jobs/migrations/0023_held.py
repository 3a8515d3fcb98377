# Held becomes a field the adapters set (Status.held), not a reading of the stored reason.

from django.db import migrations, models

# What the reason said of a held job before this field: Slurm's three held reasons in
# words (schedulers/slurm/status.py at the time) and HTCondor's "held: ..." prefix.
SLURM_HELD_TEXTS = [
    "held by an administrator",
    "held by you",
    "the node could not start it and Slurm holds it: release it to try again, or cancel it",
]


def mark_held(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    pending = Job.objects.filter(state="pending")
    pending.filter(
        models.Q(pending_reason__in=SLURM_HELD_TEXTS) | models.Q(pending_reason__startswith="held: ")
    ).update(held=True)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0022_bounded_command"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="held",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(mark_held, migrations.RunPython.noop),
    ]
