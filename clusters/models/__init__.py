"""The clusters' models (app label ``jobs``, so their tables keep their names):

- clusters: Cluster, Partition
- accounts: ClusterAccount (how a person logs in to a cluster, and its proof)
- gpus: GpuType (a cluster's GPU types: capability, memory) and choosing by them
- personal_keys: PersonalKey (a person's SSH public keys, certified to reach their jobs)
"""

from clusters.models.accounts import ClusterAccount
from clusters.models.clusters import Cluster, Partition
from clusters.models.gpus import GpuType
from clusters.models.personal_keys import PersonalKey

__all__ = ["Cluster", "ClusterAccount", "GpuType", "Partition", "PersonalKey"]
