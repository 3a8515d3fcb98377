from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("identity", "0002_identity_confirmation"),
    ]

    operations = [
        migrations.AddField(
            model_name="identity",
            name="provider_username",
            field=models.CharField(blank=True, db_default="", max_length=255),
        ),
        migrations.AddField(
            model_name="identity",
            name="account_checked_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
