"""Reaching a cluster: SSH, certificates, pools, files, cluster models.

Reaching a cluster, whatever its scheduler: SSH connections with pinned host keys and
timeouts (ssh.py), one pooled connection per account (pool.py), certificates (certs.py,
signer.py), bulk transfers over OpenSSH masters (bulk.py, masters.py, openssh.py), a
job's files read over SFTP under the hostile-file rules (files.py), the work-directory
layout (workdir.py), and the models of clusters, partitions, GPU types and accounts.
Nothing here knows a scheduler or a job.
"""
