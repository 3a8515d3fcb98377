"""Scheduler reads run in a clean environment (Cluster.command_path): ``env -i`` with the
cluster's PATH, so no exported function, alias, PATH or SLURM_* variable of a person's
login environment reaches squeue or sacctmgr. Submissions keep the environment (the job
takes it). (Real sshd: tests/devcluster/test_login_evidence.py.)"""

from __future__ import annotations

from clusters import ssh
from schedulers.slurm import operations


class Recording:
    command_path = "/opt/slurm/bin:/usr/bin:/bin"

    def __init__(self) -> None:
        self.argv: list[list[str]] = []

    def run(self, argv, **kwargs):
        self.argv.append(list(argv))
        return ssh.Result("", "", 0)


def test_reads_run_in_a_clean_environment_and_submissions_do_not():
    conn = Recording()
    operations.run(conn, ["squeue", "--json"])  # type: ignore[arg-type]
    assert conn.argv[-1] == [
        "/usr/bin/env",
        "-i",
        "PATH=/opt/slurm/bin:/usr/bin:/bin",
        "LANG=C",
        "squeue",
        "--json",
    ]
    operations.run(conn, ["bash", "-c", "sbatch"], clean=False)  # type: ignore[arg-type]
    assert conn.argv[-1] == ["bash", "-c", "sbatch"]
    conn.command_path = ""  # a cluster whose scheduler needs the login environment
    operations.run(conn, ["squeue"])  # type: ignore[arg-type]
    assert conn.argv[-1] == ["squeue"]
