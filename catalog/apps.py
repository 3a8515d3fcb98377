from django.apps import AppConfig


class CatalogConfig(AppConfig):
    """Images, tags, image checks and session apps. Its models keep the app label
    ``jobs`` (their tables, content types and admin URLs) from before the split."""

    name = "catalog"
    verbose_name = "Catalog"
