#!/usr/bin/env bash
# Start a real two-node Slurm cluster on this machine, reachable over a real sshd
# on 127.0.0.1, for the demo and the integration tests. The two nodes are two
# slurmd daemons on this host (Slurm's multiple-slurmd mode, `slurmd -N NAME`), each
# with its own port, spool and log, and two of the four fake GPUs.
#
# Idempotent: a second run starts only what is not running. Needs root.
# Everything it makes lives under $STATE (default /var/lib/portal-devcluster)
# except /etc/slurm/slurm.conf and gres.conf, which client commands read and
# which it only writes when they are absent or were written by this script.
set -euo pipefail

STATE=${PORTAL_DEVCLUSTER_DIR:-/var/lib/portal-devcluster}
SSH_PORT=${PORTAL_DEVCLUSTER_SSH_PORT:-2222}
# A second sshd on the same machine, as a centre's data-transfer node beside its login
# node: the same users and file systems, another SSH entry point. The file manager's
# tests use it, so a test that restarts the login node's sshd never cuts them.
DTN_SSH_PORT=${PORTAL_DEVCLUSTER_DTN_SSH_PORT:-$((SSH_PORT + 8))}
CLUSTER_USER=${PORTAL_DEVCLUSTER_USER:-hpcuser}
SECOND_USER=${PORTAL_DEVCLUSTER_USER2:-hpcuser2}
# Two kinds of fake GPU, one per node, so that requests by capability and memory have
# something to choose between: node1 "v100" (compute capability 7.0, 32 GB), node2 "a100"
# (8.0, 80 GB). Each is both a typed GRES and a node feature, as many sites configure them.
GPU_TYPES=(v100 a100)
NODES=(node1 node2)  # resolvable through a managed line in /etc/hosts (below)
MARK="# managed by hpc-portal deploy/devcluster (safe to delete with make devcluster-down)"
HERE=$(cd "$(dirname "$0")" && pwd)

log() { printf 'devcluster: %s\n' "$*"; }
die() { printf 'devcluster: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (it installs packages, creates users and starts daemons)"

# --- packages -------------------------------------------------------------------
need=()
for pair in slurmctld:slurmctld slurmd:slurmd slurmdbd:slurmdbd sbatch:slurm-client munged:munge sshd:openssh-server ssh-keygen:openssh-client python3:python3 mpirun:openmpi-bin rclone:rclone; do
    cmd=${pair%%:*}; pkg=${pair#*:}
    command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Distributed training (MPI launcher, the data-parallel demo): Debian's mpi4py for Open MPI.
[ -f /usr/lib/python3/dist-packages/mpi4py/__init__.py ] || {
    log "installing python3-mpi4py"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-mpi4py >/dev/null
}

mkdir -p "$STATE"/{slurmctld,slurmd,log,run}
chmod 755 "$STATE"

# VS Code sessions: code-server from npm (deploy/devcluster/code-server.sh). Its Debian
# packages now; its npm install (minutes, mostly download and native builds) in the
# background while the cluster starts, waited for before the cluster is described below.
bash "$HERE/code-server.sh" --packages
bash "$HERE/code-server.sh" > "$STATE/log/code-server-install.log" 2>&1 &
CODE_SERVER_INSTALL=$!
HOST=$(hostname -s)

# --- node names: both nodes are this host; jobs, MPI and the session proxy reach them by name ----
HOSTS_LINE="127.0.0.1 ${NODES[*]} $MARK"
if ! grep -qxF "$HOSTS_LINE" /etc/hosts; then
    log "naming the nodes in /etc/hosts: ${NODES[*]}"
    # (/etc/hosts may be a bind mount: rewrite it in place, never replace the file)
    hosts=$(grep -vF "$MARK" /etc/hosts || true)
    printf '%s\n%s\n' "$hosts" "$HOSTS_LINE" > /etc/hosts
fi

# --- cluster users and their key pairs ---------------------------------------------
make_user() {
    local user=$1
    if ! id "$user" >/dev/null 2>&1; then
        log "creating cluster user $user"
        useradd --create-home --shell /bin/bash "$user"
    fi
    # '*' (not '!'): no password login, but not "locked" either, which sshd would refuse.
    usermod -p '*' "$user"
    local home; home=$(getent passwd "$user" | cut -d: -f6)
    if [ ! -f "$STATE/${user}_ed25519" ]; then
        ssh-keygen -q -t ed25519 -N '' -C "$user@portal-devcluster" -f "$STATE/${user}_ed25519"
    fi
    chmod 600 "$STATE/${user}_ed25519"
    install -d -m 700 -o "$user" -g "$user" "$home/.ssh"
    local auth="$home/.ssh/authorized_keys"
    touch "$auth"
    grep -qF "$(cut -d' ' -f2 "$STATE/${user}_ed25519.pub")" "$auth" || cat "$STATE/${user}_ed25519.pub" >> "$auth"
    chown "$user:$user" "$auth"; chmod 600 "$auth"
    install -d -m 755 -o "$user" -g "$user" "/scratch/$user"
    # Open MPI's shared-memory transport (vader) crashes under this machine's sandboxed
    # kernel: ranks talk over TCP, also between the two nodes on this one host.
    install -d -m 755 -o "$user" -g "$user" "$home/.openmpi"
    local mca="$home/.openmpi/mca-params.conf"
    if [ ! -e "$mca" ] || grep -qF "$MARK" "$mca"; then  # never one the user wrote
        printf '%s\nbtl = self,tcp\n' "$MARK" > "$mca"
        chown "$user:$user" "$mca"
    fi
}
install -d -m 755 /scratch
make_user "$CLUSTER_USER"
make_user "$SECOND_USER"

# --- sshd on 127.0.0.1:$SSH_PORT ------------------------------------------------------
# alive PIDFILE, stop_recorded PIDFILE...: deploy/lib/pidfile.sh
# shellcheck source=deploy/lib/pidfile.sh
. "$HERE/../lib/pidfile.sh"

[ -f "$STATE/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$STATE/ssh_host_ed25519_key"
# Certificates signed by the portal's CA (clusters in certificate mode): deploy/lib/ssh_ca.sh.
TRUSTED=$STATE/trusted_user_ca_keys
# shellcheck source=deploy/lib/ssh_ca.sh
. "$HERE/../lib/ssh_ca.sh"
trust_portal_ca "$TRUSTED" "$STATE/principals" devcluster "$CLUSTER_USER" "$SECOND_USER"
# SFTP as Debian's sshd_config has it: sftp-server started through the person's login
# shell, as on most clusters (whose ~/.bashrc then runs first, and can hang it:
# tests/devcluster/test_one_person_at_once.py).
SFTP_SERVER=/usr/lib/openssh/sftp-server
[ -x "$SFTP_SERVER" ] || SFTP_SERVER=internal-sftp
SSHD_CONFIG_BEFORE=$(cat "$STATE/sshd_config" 2>/dev/null || true)
cat > "$STATE/sshd_config" <<EOF
$MARK
ListenAddress 127.0.0.1
Port $SSH_PORT
HostKey $STATE/ssh_host_ed25519_key
PidFile $STATE/run/sshd.pid
AllowUsers $CLUSTER_USER $SECOND_USER loaduser???
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UsePAM no
AuthorizedKeysFile .ssh/authorized_keys
TrustedUserCAKeys $TRUSTED
AuthorizedPrincipalsFile $STATE/principals/%u
MaxSessions 64
MaxStartups 64:30:128
ClientAliveInterval 30
Subsystem sftp $SFTP_SERVER
EOF
mkdir -p /run/sshd
/usr/sbin/sshd -t -f "$STATE/sshd_config" || die "sshd rejects $STATE/sshd_config"
if ! alive "$STATE/run/sshd.pid"; then
    log "starting sshd on 127.0.0.1:$SSH_PORT"
    /usr/sbin/sshd -f "$STATE/sshd_config" -E "$STATE/log/sshd.log"
elif [ "$SSHD_CONFIG_BEFORE" != "$(cat "$STATE/sshd_config")" ]; then
    log "sshd_config changed; reloading sshd"  # (SIGHUP: open sessions carry on)
    kill -HUP "$(cat "$STATE/run/sshd.pid")"
fi
# The data-transfer node: the same configuration on its own port, pid file and log.
DTN_CONFIG_BEFORE=$(cat "$STATE/sshd_dtn_config" 2>/dev/null || true)
sed -e "s/^Port .*/Port $DTN_SSH_PORT/" -e "s#^PidFile .*#PidFile $STATE/run/sshd-dtn.pid#" \
    "$STATE/sshd_config" > "$STATE/sshd_dtn_config"
/usr/sbin/sshd -t -f "$STATE/sshd_dtn_config" || die "sshd rejects $STATE/sshd_dtn_config"
if ! alive "$STATE/run/sshd-dtn.pid"; then
    log "starting the data-transfer node's sshd on 127.0.0.1:$DTN_SSH_PORT"
    /usr/sbin/sshd -f "$STATE/sshd_dtn_config" -E "$STATE/log/sshd-dtn.log" \
        || die "the data-transfer node's sshd did not start: $(tail -1 "$STATE/log/sshd-dtn.log")"
elif [ "$DTN_CONFIG_BEFORE" != "$(cat "$STATE/sshd_dtn_config")" ]; then
    kill -HUP "$(cat "$STATE/run/sshd-dtn.pid")"
fi

# --- munge ------------------------------------------------------------------------------
install -d -m 755 -o munge -g munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    install -d -m 700 -o munge -g munge /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
fi
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged --force
    for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
    munge -n | unmunge >/dev/null || die "munged does not answer; see /var/log/munge/munged.log"
    # Remember that we started it, so devcluster-down stops only what it started.
    cp /run/munge/munged.pid "$STATE/run/munged.pid" 2>/dev/null || true
fi

# --- slurm.conf and gres.conf -------------------------------------------------------------
write_managed() {  # write_managed FILE: content on stdin; never clobbers a file we did not write
    local file=$1 tmp; tmp=$(mktemp)
    cat > "$tmp"
    if [ -f "$file" ] && ! grep -qF "$MARK" "$file"; then
        rm -f "$tmp"
        die "$file exists and was not written by the devcluster; refusing to overwrite it"
    fi
    if ! cmp -s "$tmp" "$file"; then
        install -m 644 "$tmp" "$file"; CONF_CHANGED=1
    fi
    rm -f "$tmp"
}
CONF_CHANGED=0
mkdir -p /etc/slurm
# Declared size is larger than the machine so several test jobs run at once
# (SlurmdParameters=config_overrides); jobs here are tiny.
write_managed /etc/slurm/slurm.conf <<EOF
$MARK
ClusterName=devcluster
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd/%n
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# Real accounting (slurmdbd + MariaDB, below): sacct knows every job, attempts included.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
# GPUs in each job's AllocTRES, so GPU-hours come from accounting (as sites configure it).
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
# Fair-share as sites run it (sshare says how a group's recent use compares with its share:
# the project page's sentence). Usage decays over a week and is recomputed every minute.
PriorityType=priority/multifactor
PriorityDecayHalfLife=7-0
PriorityCalcPeriod=1
PriorityWeightFairshare=1000
PriorityWeightAge=100
# Backfill every 5 s (default 30) so short test jobs start behind blocked ones.
SchedulerParameters=bf_interval=5
SlurmdParameters=config_overrides
ReturnToService=2
GresTypes=gpu
# Finished jobs stay visible to squeue for an hour (after that, sacct has them).
MinJobAge=3600
KillWait=5
OverTimeLimit=0
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
# Two nodes on this host (multiple-slurmd mode): each its own port; two fake GPUs each.
NodeName=${NODES[0]} NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17001 CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=32000 Gres=gpu:${GPU_TYPES[0]}:2 Features=${GPU_TYPES[0]} State=UNKNOWN
NodeName=${NODES[1]} NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17002 CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=32000 Gres=gpu:${GPU_TYPES[1]}:2 Features=${GPU_TYPES[1]} State=UNKNOWN
PartitionName=gpu Nodes=${NODES[0]},${NODES[1]} Default=YES MaxTime=1-00:00:00 DefaultTime=01:00:00 State=UP
PartitionName=cpu Nodes=${NODES[0]},${NODES[1]} MaxTime=00:30:00 DefaultTime=00:10:00 State=UP
EOF
write_managed /etc/slurm/gres.conf <<EOF
$MARK
# Fake GPUs: any existing device nodes will do; Slurm schedules them and sets
# CUDA_VISIBLE_DEVICES for the job.
AutoDetect=off
NodeName=${NODES[0]} Name=gpu Type=${GPU_TYPES[0]} File=/dev/tty[0-1]
NodeName=${NODES[1]} Name=gpu Type=${GPU_TYPES[1]} File=/dev/tty[2-3]
EOF

# --- accounting: MariaDB and slurmdbd, so sacct answers as on a real cluster ---------------
# A database and a user of our own with a random password (kept in $STATE, 0600); root's
# socket login is used only for this set-up.
mysql_up() { mariadb-admin --protocol=socket ping >/dev/null 2>&1; }
if ! mysql_up; then
    command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || {
        log "installing mariadb-server"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mariadb-server >/dev/null
    }
fi
if ! mysql_up; then  # (the package's own scripts may have started it just now)
    log "starting MariaDB"
    install -d -m 755 -o mysql -g mysql /run/mysqld
    # mariadbd does not fork: the pid written here is the server's, for down.sh.
    start-stop-daemon --start --oknodo --background --make-pidfile \
        --pidfile "$STATE/run/mariadbd.pid" --exec /usr/sbin/mariadbd -- --user=mysql
    for _ in $(seq 100); do mysql_up && break; sleep 0.2; done
    mysql_up || die "MariaDB did not start"
fi
[ -s "$STATE/slurmdbd.password" ] || (umask 077 && python3 -c 'import secrets; print(secrets.token_hex(16))' > "$STATE/slurmdbd.password")
DBD_PASSWORD=$(cat "$STATE/slurmdbd.password")
# root only while our user cannot log in yet (first run, or a new password).
MYSQL_PWD=$DBD_PASSWORD mariadb --protocol=socket -u portal_slurm -e 'SELECT 1' portal_slurm_acct >/dev/null 2>&1 \
    || mariadb --protocol=socket -u root <<EOF
CREATE DATABASE IF NOT EXISTS portal_slurm_acct;
CREATE USER IF NOT EXISTS 'portal_slurm'@'localhost' IDENTIFIED BY '$DBD_PASSWORD';
ALTER USER 'portal_slurm'@'localhost' IDENTIFIED BY '$DBD_PASSWORD';
GRANT ALL ON portal_slurm_acct.* TO 'portal_slurm'@'localhost';
EOF
DBD_CONF=$(mktemp)
cat > "$DBD_CONF" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=portal_slurm_acct
StorageUser=portal_slurm
StoragePass=$DBD_PASSWORD
EOF
if [ -f /etc/slurm/slurmdbd.conf ] && ! grep -qF "$MARK" /etc/slurm/slurmdbd.conf; then
    rm -f "$DBD_CONF"; die "/etc/slurm/slurmdbd.conf was not written by the devcluster; refusing to overwrite it"
fi
if ! cmp -s "$DBD_CONF" /etc/slurm/slurmdbd.conf; then
    install -m 600 -o root -g root "$DBD_CONF" /etc/slurm/slurmdbd.conf
    stop_recorded "$STATE/run/slurmdbd.pid"
fi
rm -f "$DBD_CONF"
if ! alive "$STATE/run/slurmdbd.pid"; then
    log "starting slurmdbd"
    /usr/sbin/slurmdbd
fi
for _ in $(seq 100); do sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1 && break; sleep 0.2; done
sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx devcluster \
    || sacctmgr -i add cluster devcluster >/dev/null \
    || die "slurmdbd does not answer; see $STATE/log/slurmdbd.log"
# Associations, so accounting records who ran each job (no limits are enforced).
sacctmgr -n -P list account format=account 2>/dev/null | grep -qx portal \
    || sacctmgr -i add account portal Description=portal-devcluster Organization=dev >/dev/null
for user in "$CLUSTER_USER" "$SECOND_USER"; do
    sacctmgr -n -P list user "$user" format=user 2>/dev/null | grep -qx "$user" \
        || sacctmgr -i add user "$user" account=portal >/dev/null
done
# Two projects (#41): vision (both users; the first its coordinator) and nlp (the first
# only). The users' default account stays portal, which the portal registers as an
# account for charging only (no one sees the others' runs through it).
has_assoc() { sacctmgr -n -P show assoc "account=$1" "user=$2" format=user 2>/dev/null | grep -qx "$2"; }
for account in vision nlp; do
    sacctmgr -n -P list account format=account 2>/dev/null | grep -qx "$account" \
        || sacctmgr -i add account "$account" Description="$account-project" Organization=dev >/dev/null
done
has_assoc vision "$CLUSTER_USER" || sacctmgr -i add user "$CLUSTER_USER" account=vision >/dev/null
has_assoc vision "$SECOND_USER" || sacctmgr -i add user "$SECOND_USER" account=vision >/dev/null
has_assoc nlp "$CLUSTER_USER" || sacctmgr -i add user "$CLUSTER_USER" account=nlp >/dev/null
sacctmgr -n -P show account vision withcoord format=coordinators 2>/dev/null | grep -qw "$CLUSTER_USER" \
    || sacctmgr -i add coordinator account=vision names="$CLUSTER_USER" >/dev/null

# --- slurmctld and slurmd -------------------------------------------------------------------
# (slurmdbd reads only slurmdbd.conf, handled above; slurmctld re-registers with it.)
SLURMD_PIDS=("$STATE/run/slurmd.pid")  # (the single node's, before there were two)
for node in "${NODES[@]}"; do SLURMD_PIDS+=("$STATE/run/slurmd-$node.pid"); done
if [ "$CONF_CHANGED" = 1 ]; then
    log "configuration changed; restarting slurm daemons"
    stop_recorded "${SLURMD_PIDS[@]}" "$STATE/run/slurmctld.pid"
    rm -f "$STATE/run/slurmd.pid"
fi
if ! alive "$STATE/run/slurmctld.pid"; then
    log "starting slurmctld"
    /usr/sbin/slurmctld
fi
for node in "${NODES[@]}"; do
    mkdir -p "$STATE/slurmd/$node"
    if ! alive "$STATE/run/slurmd-$node.pid"; then
        log "starting slurmd for $node"
        /usr/sbin/slurmd -N "$node"
    fi
done

for node in "${NODES[@]}"; do
    for _ in $(seq 60); do
        state=$(sinfo -h -n "$node" -o '%T' 2>/dev/null | head -1 || true)
        case "$state" in
            idle*|mixed*|allocated*) break ;;
            down*|drain*) scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true ;;
        esac
        sleep 0.5
    done
    case "$state" in
        idle*|mixed*|allocated*) ;;
        *) die "node $node is '$state' after 30 s; see $STATE/log/slurmd-$node.log and slurmctld.log" ;;
    esac
done

# vision's allocation: 100 GPU-hours, at most 4 GPUs at once (not enforced here: the
# project page shows them as a centre's would). slurmdbd knows the gres/gpu TRES only
# once slurmctld has registered it (AccountingStorageTRES), so on a fresh machine this
# waits for that registration.
if ! sacctmgr -n -P show assoc account=vision user= format=grptresmins 2>/dev/null | grep -q "gres/gpu=6000"; then
    for _ in $(seq 100); do
        sacctmgr -n -P show tres format=type,name 2>/dev/null | grep -qx 'gres|gpu' && break
        sleep 0.2
    done
    sacctmgr -i modify account vision set GrpTRESMins=gres/gpu=6000 GrpTRES=gres/gpu=4 >/dev/null \
        || die "slurmdbd refused vision's GPU limits (gres/gpu TRES not registered?); see $STATE/log/slurmctld.log"
fi

# --- JupyterLab on the node (notebook sessions, runtime "none") ------------------------------------
# A virtualenv from Debian's python3 with the locked JupyterLab, on every user's PATH.
JUPYTER_ENV=/opt/portal-devcluster/jupyter
if ! cmp -s "$HERE/jupyter.lock" "$JUPYTER_ENV/.installed" 2>/dev/null; then
    log "installing JupyterLab for notebook sessions into $JUPYTER_ENV"
    /usr/bin/python3 -m venv --help >/dev/null 2>&1 || {
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; }
    rm -rf "$JUPYTER_ENV"
    /usr/bin/python3 -m venv "$JUPYTER_ENV"
    "$JUPYTER_ENV/bin/pip" install -q -r "$HERE/jupyter.lock" 2>&1 | { grep -v "is ignored: it is neither" || true; }
    cp "$HERE/jupyter.lock" "$JUPYTER_ENV/.installed"
fi
ln -sf "$JUPYTER_ENV/bin/jupyter" /usr/local/bin/jupyter
ln -sf "$JUPYTER_ENV/bin/tensorboard" /usr/local/bin/tensorboard
# Fake GPUs need a fake nvidia-smi: the metrics client samples the job's GPUs with it, so
# a session holding GPUs shows as idle (0 % utilisation, as a tty computes nothing). Only
# where no real one is installed.
if ! command -v nvidia-smi >/dev/null 2>&1 || grep -q portal-devcluster "$(command -v nvidia-smi)"; then
    cat > /usr/local/bin/nvidia-smi.tmp <<'FAKE_NVIDIA_SMI'
#!/bin/sh
# portal-devcluster: fake nvidia-smi for the dev cluster's fake GPUs (two per node, idle).
case "$*" in
    *--query-gpu=index,uuid,utilization.gpu,memory.used*--format=csv,noheader,nounits*)
        printf '0, GPU-devcluster-%s-0, 0, 0\n1, GPU-devcluster-%s-1, 0, 0\n' "${SLURMD_NODENAME:-node}" "${SLURMD_NODENAME:-node}" ;;
    *) echo "fake nvidia-smi (portal dev cluster): only --query-gpu=index,uuid,utilization.gpu,memory.used --format=csv,noheader,nounits" ;;
esac
FAKE_NVIDIA_SMI
    chmod 0755 /usr/local/bin/nvidia-smi.tmp && mv -f /usr/local/bin/nvidia-smi.tmp /usr/local/bin/nvidia-smi
fi

# The demo training job (catalog entry "Digits classifier"): `train-digits` on every PATH.
install -d -m 0755 /opt/portal-devcluster/examples
install -m 0644 "$HERE/examples/train_digits.py" /opt/portal-devcluster/examples/train_digits.py
printf '#!/bin/sh\nexec %s/bin/python /opt/portal-devcluster/examples/train_digits.py "$@"\n' \
    "$JUPYTER_ENV" > /usr/local/bin/train-digits.tmp
chmod 0755 /usr/local/bin/train-digits.tmp && mv -f /usr/local/bin/train-digits.tmp /usr/local/bin/train-digits
# The sweep demo (catalog entry "Digits sweep"): `sweep-digits`, one fold per job.
install -m 0644 "$HERE/examples/sweep_digits.py" /opt/portal-devcluster/examples/sweep_digits.py
printf '#!/bin/sh\nexec %s/bin/python /opt/portal-devcluster/examples/sweep_digits.py "$@"\n' \
    "$JUPYTER_ENV" > /usr/local/bin/sweep-digits.tmp
chmod 0755 /usr/local/bin/sweep-digits.tmp && mv -f /usr/local/bin/sweep-digits.tmp /usr/local/bin/sweep-digits
# The data-parallel demo ("Data-parallel digits"): the same environment plus
# Debian's mpi4py, alone on the path (Debian's other packages would shadow the venv's).
install -m 0644 "$HERE/examples/train_digits_mpi.py" /opt/portal-devcluster/examples/train_digits_mpi.py
install -d -m 0755 /opt/portal-devcluster/mpi4py
ln -sfn /usr/lib/python3/dist-packages/mpi4py /opt/portal-devcluster/mpi4py/mpi4py
printf '#!/bin/sh\nPYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/opt/portal-devcluster/mpi4py" exec %s/bin/python /opt/portal-devcluster/examples/train_digits_mpi.py "$@"\n' \
    "$JUPYTER_ENV" > /usr/local/bin/train-digits-mpi.tmp
chmod 0755 /usr/local/bin/train-digits-mpi.tmp && mv -f /usr/local/bin/train-digits-mpi.tmp /usr/local/bin/train-digits-mpi

# --- PyTorch for the torchrun launcher (CPU build, where this machine has one on disk) -------------
# Only a CPU wheel already on this machine (pip's find-links, e.g. /opt/wheels) is used:
# PyPI's plain `torch` is a CUDA build of several GB. Without one, torchrun jobs cannot run
# here and the dev-cluster test of a real torchrun says so.
TORCH_ENV=/opt/portal-devcluster/torch
PY_TAG=$(/usr/bin/python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
TORCH_WHEEL=$(find ${PIP_FIND_LINKS:-/opt/wheels} -maxdepth 1 -name "torch-*+cpu-$PY_TAG-$PY_TAG-*.whl" 2>/dev/null | sort | tail -n 1 || true)
TORCH_STAMP="$(basename "${TORCH_WHEEL:-none}") $(sha256sum "$HERE/torch.lock" | cut -c1-16)"
if [ -n "$TORCH_WHEEL" ] && [ "$(cat "$TORCH_ENV/.installed" 2>/dev/null)" != "$TORCH_STAMP" ]; then
    log "installing PyTorch (CPU, $(basename "$TORCH_WHEEL")) into $TORCH_ENV"
    rm -rf "$TORCH_ENV"
    /usr/bin/python3 -m venv "$TORCH_ENV"
    "$TORCH_ENV/bin/pip" install -q --no-deps "$TORCH_WHEEL" 2>&1 | { grep -v "is ignored: it is neither" || true; }
    "$TORCH_ENV/bin/pip" install -q --no-deps -r "$HERE/torch.lock" 2>&1 | { grep -v "is ignored: it is neither" || true; }
    echo "$TORCH_STAMP" > "$TORCH_ENV/.installed"
fi
if [ -x "$TORCH_ENV/bin/torchrun" ]; then
    ln -sf "$TORCH_ENV/bin/torchrun" /usr/local/bin/torchrun
    # (a wrapper, not a link: Python finds its venv next to the path it was started as)
    printf '#!/bin/sh\nexec %s/bin/python "$@"\n' "$TORCH_ENV" > /usr/local/bin/torch-python.tmp
    chmod 0755 /usr/local/bin/torch-python.tmp && mv -f /usr/local/bin/torch-python.tmp /usr/local/bin/torch-python
else
    log "no PyTorch CPU wheel for $PY_TAG on this machine: torchrun jobs cannot run on the dev cluster"
fi

wait "$CODE_SERVER_INSTALL" \
    || die "installing code-server failed; see $STATE/log/code-server-install.log"

# --- what the portal needs to register the cluster ------------------------------------------------
python3 - "$STATE" "$SSH_PORT" "$CLUSTER_USER" "$SECOND_USER" "${NODES[*]}" "$DTN_SSH_PORT" <<'EOF'
import json, sys
state, port, user, user2 = sys.argv[1:5]
info = {
    "name": "devcluster",
    "ssh_host": "127.0.0.1",
    "ssh_port": int(port),
    # The data-transfer node's sshd (same host key, users and file systems).
    "dtn_ssh_port": int(sys.argv[6]),
    "host_key": open(f"{state}/ssh_host_ed25519_key.pub").read().split(" ")[0:2],
    "users": {
        u: {"private_key_file": f"{state}/{u}_ed25519"} for u in (user, user2)
    },
    "default_user": user,
    # Where tests trust a CA of their own (certificate mode) and read sshd's log.
    "trusted_user_ca_keys": f"{state}/trusted_user_ca_keys",
    "sshd_log": f"{state}/log/sshd.log",
    "partitions": ["gpu", "cpu"],
    # What the admin describes once per GPU type (GpuType); sinfo cannot say it.
    "gpu_types": [
        {"name": "v100", "model": "Tesla V100-SXM2-32GB (simulated)", "compute_capability": "7.0", "memory_gb": 32, "feature": "v100"},
        {"name": "a100", "model": "A100-SXM4-80GB (simulated)", "compute_capability": "8.0", "memory_gb": 80, "feature": "a100"},
    ],
    "nodes": sys.argv[5].split(),
    "gpus_per_node": 2,
    # The accounts made above, as a centre would set up their projects in the portal's
    # admin: what their associated users may do with each other's runs (#41).
    "projects": {"portal": "none", "vision": "viewer", "nlp": "member"},
}
info["host_key"] = " ".join(info["host_key"])
with open(f"{state}/cluster.json", "w") as fh:
    json.dump(info, fh, indent=2)
EOF

log "up: sshd 127.0.0.1:$SSH_PORT (data-transfer node :$DTN_SSH_PORT), users $CLUSTER_USER and $SECOND_USER, state in $STATE"
sinfo -o '%P %a %l %D %t %G'
log "try: ssh -i $STATE/${CLUSTER_USER}_ed25519 -p $SSH_PORT $CLUSTER_USER@127.0.0.1 sinfo"
