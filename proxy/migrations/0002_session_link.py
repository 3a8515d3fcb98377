"""The session model is SessionLink (Django's own Session is a browser's sign-in). Its
table keeps the name proxy_session (db_table), so nothing changes in the database; the
content type follows the new name."""

from django.db import migrations

OLD, NEW = "session", "sessionlink"


def _relabel(apps, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    if not ContentType.objects.filter(app_label="proxy", model=new).exists():
        ContentType.objects.filter(app_label="proxy", model=old).update(model=new)


def forwards(apps, schema_editor) -> None:
    _relabel(apps, OLD, NEW)


def backwards(apps, schema_editor) -> None:
    _relabel(apps, NEW, OLD)


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("proxy", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RenameModel(old_name="Session", new_name="SessionLink"),
                migrations.AlterModelTable(name="sessionlink", table="proxy_session"),
            ]
        ),
        migrations.RunPython(forwards, backwards),
    ]
