"""One spelling of work dir: the field is work_dir_kind. Its column keeps the name
workdir_kind (db_column), so nothing changes in the database: processes of the previous
release keep working during a rolling deploy."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0014_metrics_moved_to_their_app"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="job",
                    name="workdir_kind",
                    field=models.CharField(
                        choices=[("home", "Home"), ("scratch", "Scratch")],
                        db_column="workdir_kind",
                        default="home",
                        max_length=16,
                    ),
                ),
                migrations.RenameField(
                    model_name="job",
                    old_name="workdir_kind",
                    new_name="work_dir_kind",
                ),
            ]
        ),
    ]
