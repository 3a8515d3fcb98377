"""One spelling of work dir: the field is work_dir_kind (the column is renamed, rows kept)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0014_metrics_moved_to_their_app'),
    ]

    operations = [
        migrations.RenameField(
            model_name='job',
            old_name='workdir_kind',
            new_name='work_dir_kind',
        ),
    ]
