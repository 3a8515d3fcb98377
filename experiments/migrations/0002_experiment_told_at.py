from django.db import migrations, models
from django.db.models import F


def ended_ones_were_told(apps, schema_editor):
    """Experiments that ended before this field existed were told (or not wanted) then:
    the sweep must not tell them again."""
    Experiment = apps.get_model("experiments", "Experiment")
    Experiment.objects.exclude(state="running").update(told_at=F("ended_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="experiment",
            name="told_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(ended_ones_were_told, migrations.RunPython.noop),
    ]
