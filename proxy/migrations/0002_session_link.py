"""The session model is SessionLink: Django's own Session is a browser's sign-in."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0014_metrics_moved_to_their_app'),
        ('proxy', '0001_initial'),
    ]

    operations = [
        migrations.RenameModel(
            old_name='Session',
            new_name='SessionLink',
        ),
    ]
