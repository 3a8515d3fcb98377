from django.apps import AppConfig


class ClustersConfig(AppConfig):
    """Reaching a cluster: SSH, the pool, certificates, bulk transfer, and the models of
    clusters, partitions, GPU types and accounts. Its models keep the app label ``jobs``
    (and so their tables, content types and admin URLs) from before the house was split."""

    name = "clusters"
    verbose_name = "Clusters"
