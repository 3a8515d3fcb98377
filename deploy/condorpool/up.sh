#!/usr/bin/env bash
# Start a real one-machine HTCondor pool on this host, reachable over its own sshd, for the
# demo and the integration tests: the portal reaches it exactly as it would a real access
# point (SSH with a pinned host key, an unprivileged user, condor_submit/condor_q/...).
#
# Debian bookworm has no HTCondor daemons; Debian trixie ships `minicondor` (23.9). So the
# pool lives in a trixie root made by Debian's debootstrap (about 600 MB, built once and
# kept in $STATE/root): condor_master and an sshd run chrooted there, as do the jobs. Two
# simulated GPUs (condor_gpu_discovery -simulate) with different capabilities and memory
# let GPU requirements be tested: a Tesla V100 (7.0, 24220 MB) and an A100 (8.0, 47661 MB).
#
# Idempotent: a second run starts only what is not running. Needs root. PIDs are recorded
# under $STATE/root/run; deploy/condorpool/down.sh stops them by PID.
set -euo pipefail

STATE=${PORTAL_CONDORPOOL_DIR:-/var/lib/portal-condorpool}
SSH_PORT=${PORTAL_CONDORPOOL_SSH_PORT:-2223}
MIRROR=${PORTAL_CONDORPOOL_MIRROR:-http://deb.debian.org/debian}
USERS=(condoruser condoruser2)
UIDS=(2201 2202)  # fixed and apart from the host's users: processes are visible to the host
ROOT=$STATE/root
HERE=$(cd "$(dirname "$0")" && pwd)
JUPYTER_LOCK=$HERE/../devcluster/jupyter.lock
MARK="# managed by hpc-portal deploy/condorpool"

log() { printf 'condorpool: %s\n' "$*"; }
die() { printf 'condorpool: error: %s\n' "$*" >&2; exit 1; }
# A command inside the root, with a clean environment (none of the host's pip settings).
inroot_at() {
    local root=$1; shift
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        HOME=/root chroot "$root" "$@"
}
inroot() { inroot_at "$ROOT" "$@"; }
# A recorded PID counts only while it is a process chrooted in this root (after a reboot
# the file may name an unrelated process).
alive() {
    [ -f "$1" ] || return 1
    local pid; pid=$(cat "$1")
    kill -0 "$pid" 2>/dev/null && [ "$(readlink "/proc/$pid/root")" = "$(readlink -f "$ROOT")" ]
}
unmount_all() {  # unmount_all ROOT: what mounts() bound, innermost first
    local m
    for m in dev/pts dev sys proc; do
        if mountpoint -q "$1/$m" 2>/dev/null; then umount "$1/$m" || umount -l "$1/$m"; fi
    done
}

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, users and daemons)"
mkdir -p "$STATE"
chmod 755 "$STATE"

# --- the trixie root with minicondor (built once) -------------------------------------------
mounts() {  # what jobs and daemons need from the host: /proc, /sys, /dev and its pts
    local root=$1
    mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
    mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"
    mountpoint -q "$root/dev/pts" || mount --bind /dev/pts "$root/dev/pts"
    mountpoint -q "$root/sys" || mount --bind /sys "$root/sys"
}
if [ ! -x "$ROOT/usr/sbin/condor_master" ]; then
    command -v debootstrap >/dev/null || {
        log "installing debootstrap"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    }
    NEW=$STATE/root.new
    # Never delete through a bind mount (the host's /dev): unmount, stay on this file system.
    unmount_all "$NEW"
    unmount_all "$ROOT"
    rm -rf --one-file-system "$NEW"
    log "building a Debian trixie root in $ROOT (debootstrap, once; about a minute)"
    # python3-cffi-backend first: minicondor's dependencies fail to configure without it.
    debootstrap --variant=minbase \
        --include=python3-cffi-backend,python3,python3-venv,openssh-server,procps,curl,ca-certificates \
        trixie "$NEW" "$MIRROR" > "$STATE/debootstrap.log" 2>&1 \
        || die "debootstrap failed; see $STATE/debootstrap.log"
    mounts "$NEW"
    inroot_at "$NEW" bash -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends minicondor' \
        > "$STATE/minicondor.log" 2>&1 || die "installing minicondor failed; see $STATE/minicondor.log"
    unmount_all "$NEW"
    rm -rf --one-file-system "$ROOT"
    mv "$NEW" "$ROOT"
fi
mounts "$ROOT"
# Names and certificates as the host has them (a proxy's CA for PyPI, the nodes' names).
cat /etc/hosts > "$ROOT/etc/hosts"
cat /etc/resolv.conf > "$ROOT/etc/resolv.conf" 2>/dev/null || true
cmp -s /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt" \
    || cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"

# --- users of the access point and their key pairs -----------------------------------------------
for i in "${!USERS[@]}"; do
    user=${USERS[$i]} uid=${UIDS[$i]}
    if ! inroot id "$user" >/dev/null 2>&1; then
        taken=$(getent passwd "$uid" | cut -d: -f1 || true)
        [ -z "$taken" ] || log "note: uid $uid is $taken on the host; it can signal $user's processes"
        log "creating pool user $user (uid $uid)"
        inroot useradd --uid "$uid" --create-home --shell /bin/bash "$user"
    fi
    uid=$(inroot id -u "$user")  # an older root may have given it another
    inroot usermod -p '*' "$user"  # no password, not locked (sshd refuses locked accounts)
    [ -f "$STATE/${user}_ed25519" ] \
        || ssh-keygen -q -t ed25519 -N '' -C "$user@portal-condorpool" -f "$STATE/${user}_ed25519"
    chmod 600 "$STATE/${user}_ed25519"
    home=$ROOT/home/$user
    install -d -m 700 -o "$uid" -g "$uid" "$home/.ssh"
    cp "$STATE/${user}_ed25519.pub" "$home/.ssh/authorized_keys"
    chown "$uid:$uid" "$home/.ssh/authorized_keys"; chmod 600 "$home/.ssh/authorized_keys"
done

# --- HTCondor's configuration ------------------------------------------------------------------
# This machine kind has no cgroup or PID-namespace delegation: HTCondor tracks jobs by
# process instead. GPUs: two simulated devices; 4 CPUs and 8 GB declared so that a few
# small test jobs (and a sweep's trials) run side by side in one partitionable slot.
# Durations: HTCondor holds a job past allowed_execute_duration (code 47); the portal's
# submit description removes such a job (periodic_remove) and reads it as "timeout".
install -d -m 755 "$ROOT/etc/condor/config.d"
changed=0  # slots, GPUs and the network are read at start: a change restarts the pool
cat > "$ROOT/etc/condor/config.d/99-portal.tmp" <<EOF
$MARK
USE_PID_NAMESPACES = False
USE_CGROUPS = False
BASE_CGROUP =
MOUNT_UNDER_SCRATCH =
NETWORK_INTERFACE = 127.0.0.1
NUM_CPUS = 4
MEMORY = 8192
use feature : GPUs
GPU_DISCOVERY_EXTRA = -simulate:2,1,4,1 -extra
use feature : PartitionableSlot
# Faster turn-around than the defaults (a one-machine pool for tests).
SCHEDD_INTERVAL = 2
NEGOTIATOR_INTERVAL = 2
NEGOTIATOR_CYCLE_DELAY = 2
STARTER_UPDATE_INTERVAL = 2
SHADOW_QUEUE_UPDATE_INTERVAL = 2
UPDATE_INTERVAL = 2
PERIODIC_EXPR_INTERVAL = 5
JOB_START_DELAY = 0
CLAIM_WORKLIFE = 0
# Accounting groups per user, as HTCondor's manual assigns them (the portal reads the map
# for its projects, #41): vision has both users, nlp the first; a job asks for one of its
# user's groups (accounting_group) or gets the first, and a user in none cannot submit.
# No GROUP_NAMES: declared groups without a quota never match (GROUP_ACCEPT_SURPLUS is
# off by default); these groups account, they do not limit.
SCHEDD_CLASSAD_USER_MAP_NAMES = Groups
CLASSAD_USER_MAPFILE_Groups = /etc/condor/accounting_groups.map
JOB_TRANSFORM_NAMES = AssignGroup
JOB_TRANSFORM_AssignGroup @=end
   EVALSET AcctGroup userMap("Groups", Owner, AcctGroup, AcctGroup)
   EVALSET AccountingGroup join(".", AcctGroup, Owner)
@end
SUBMIT_REQUIREMENT_NAMES = CheckGroup
SUBMIT_REQUIREMENT_CheckGroup = AcctGroup isnt undefined
SUBMIT_REQUIREMENT_CheckGroup_REASON = strcat("No accounting group for ", Owner)
EOF
cat > "$ROOT/etc/condor/accounting_groups.map.tmp" <<EOF
* ${USERS[0]} vision,nlp
* ${USERS[1]} vision
EOF
cmp -s "$ROOT/etc/condor/accounting_groups.map.tmp" "$ROOT/etc/condor/accounting_groups.map" || changed=1
mv -f "$ROOT/etc/condor/accounting_groups.map.tmp" "$ROOT/etc/condor/accounting_groups.map"
cmp -s "$ROOT/etc/condor/config.d/99-portal.tmp" "$ROOT/etc/condor/config.d/99-portal" || changed=1
mv -f "$ROOT/etc/condor/config.d/99-portal.tmp" "$ROOT/etc/condor/config.d/99-portal"
for d in /var/run/condor /var/lock/condor /var/log/condor /var/lib/condor; do
    inroot install -d -m 755 -o condor -g condor "$d"
done

# --- sshd inside the root on 127.0.0.1:$SSH_PORT --------------------------------------------------
[ -f "$ROOT/etc/ssh/portal_host_ed25519_key" ] \
    || inroot ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/portal_host_ed25519_key
# Certificates signed by the portal's CA, as on the dev cluster (deploy/lib/ssh_ca.sh);
# paths inside the root.
TRUSTED=$ROOT/etc/ssh/portal_trusted_user_ca_keys
# shellcheck source=deploy/lib/ssh_ca.sh
. "$HERE/../lib/ssh_ca.sh"
trust_portal_ca "$TRUSTED" "$ROOT/etc/ssh/portal_principals" condorpool "${USERS[@]}"
SSHD_CONFIG_BEFORE=$(cat "$ROOT/etc/ssh/portal_sshd_config" 2>/dev/null || true)
cat > "$ROOT/etc/ssh/portal_sshd_config" <<EOF
$MARK
ListenAddress 127.0.0.1
Port $SSH_PORT
HostKey /etc/ssh/portal_host_ed25519_key
PidFile /run/portal-sshd.pid
AllowUsers ${USERS[*]}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UsePAM no
AuthorizedKeysFile .ssh/authorized_keys
TrustedUserCAKeys /etc/ssh/portal_trusted_user_ca_keys
AuthorizedPrincipalsFile /etc/ssh/portal_principals/%u
MaxSessions 64
MaxStartups 64:30:128
ClientAliveInterval 30
Subsystem sftp internal-sftp
EOF
inroot install -d -m 755 /run/sshd
inroot /usr/sbin/sshd -t -f /etc/ssh/portal_sshd_config || die "sshd rejects portal_sshd_config"
if ! alive "$ROOT/run/portal-sshd.pid"; then
    log "starting sshd on 127.0.0.1:$SSH_PORT (inside $ROOT)"
    inroot /usr/sbin/sshd -f /etc/ssh/portal_sshd_config -E /var/log/portal-sshd.log
elif [ "$SSHD_CONFIG_BEFORE" != "$(cat "$ROOT/etc/ssh/portal_sshd_config")" ]; then
    log "sshd_config changed; reloading sshd"  # (SIGHUP: open sessions carry on)
    kill -HUP "$(cat "$ROOT/run/portal-sshd.pid")"
fi

# --- condor_master ---------------------------------------------------------------------------------
PIDFILE=$ROOT/run/condor/portal-master.pid
if alive "$PIDFILE" && [ "$changed" = 1 ]; then
    log "configuration changed; restarting HTCondor"
    inroot condor_restart -master >/dev/null 2>&1 || true
fi
if ! alive "$PIDFILE"; then
    log "starting condor_master"
    inroot /usr/sbin/condor_master -pidfile /run/condor/portal-master.pid
fi
for _ in $(seq 120); do
    slots=$(inroot condor_status -af Name 2>/dev/null | wc -l || true)
    [ "${slots:-0}" -gt 0 ] && inroot condor_q >/dev/null 2>&1 && break
    sleep 0.5
done
[ "${slots:-0}" -gt 0 ] || die "no slot in the pool after 60 s; see $ROOT/var/log/condor/"

# --- JupyterLab for notebook sessions, in the root (trixie's Python) --------------------------------
JUPYTER_ENV=/opt/portal-jupyter
if ! cmp -s "$JUPYTER_LOCK" "$ROOT$JUPYTER_ENV/.installed" 2>/dev/null; then
    log "installing JupyterLab for notebook sessions into $ROOT$JUPYTER_ENV"
    rm -rf "${ROOT:?}$JUPYTER_ENV"
    inroot python3 -m venv "$JUPYTER_ENV"
    cp "$JUPYTER_LOCK" "$ROOT/tmp/portal-jupyter.lock"
    inroot env PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
        ${PIP_INDEX_URL:+PIP_INDEX_URL=$PIP_INDEX_URL} \
        "$JUPYTER_ENV/bin/pip" install -q -r /tmp/portal-jupyter.lock
    cp "$JUPYTER_LOCK" "$ROOT$JUPYTER_ENV/.installed"
fi
ln -sf "$JUPYTER_ENV/bin/jupyter" "$ROOT/usr/local/bin/jupyter"

# --- what the portal needs to register the pool (manage.py register_condorpool) ----------------------
python3 - "$STATE" "$SSH_PORT" "$ROOT/etc/ssh/portal_host_ed25519_key.pub" "${USERS[@]}" <<'EOF'
import json, sys
state, port, host_key, *users = sys.argv[1:]
info = {
    "name": "condorpool",
    "scheduler": "htcondor",
    "description": "One-machine HTCondor pool (minicondor in a Debian trixie root; make condorpool)",
    "scratch_root": "",
    "max_cpus": 4,
    "max_memory_gb": 8,
    "max_gpus": 2,
    "gpus_per_node": 2,
    "ssh_host": "127.0.0.1",
    "ssh_port": int(port),
    "host_key": " ".join(open(host_key).read().split(" ")[0:2]),
    "users": {u: {"private_key_file": f"{state}/{u}_ed25519"} for u in users},
    "default_user": users[0],
    # Where tests trust a CA of their own (certificate mode) and read sshd's log (host paths).
    "trusted_user_ca_keys": f"{state}/root/etc/ssh/portal_trusted_user_ca_keys",
    "sshd_log": f"{state}/root/var/log/portal-sshd.log",
    # What condor_gpu_discovery -simulate:2,1,4,1 reports, as an admin would describe it.
    "gpu_types": [
        {"name": "v100", "model": "Tesla V100-PCIE-16GB", "compute_capability": "7.0", "memory_gb": 23},
        {"name": "a100", "model": "A100-SXM4-40GB", "compute_capability": "8.0", "memory_gb": 46},
    ],
    # The accounting groups of the map above, as a centre would set up their projects.
    "projects": {"vision": "viewer", "nlp": "member"},
}
tmp = f"{state}/pool.json.tmp"
with open(tmp, "w") as f:
    json.dump(info, f, indent=2)
import os
os.replace(tmp, f"{state}/pool.json")
EOF
log "up: ssh -p $SSH_PORT -i $STATE/${USERS[0]}_ed25519 ${USERS[0]}@127.0.0.1 condor_status"
