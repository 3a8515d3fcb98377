#!/usr/bin/env bash
# Cluster users for measuring the sync with a centre's population (make devcluster-accounts):
# COUNT users loaduser001..loaduserCOUNT on the dev cluster, each as a person's cluster
# account would be: a home, a scratch directory, an association in accounting, and
# certificate login (a principals file naming only that user; sshd's AllowUsers has
# loaduser???). No key pairs: the portal signs certificates for them (make devcluster
# made its CA trusted).
#
# Idempotent and quick on a second run. Needs root and the dev cluster (make devcluster).
set -euo pipefail

COUNT=${1:-200}
STATE=${PORTAL_DEVCLUSTER_DIR:-/var/lib/portal-devcluster}
PREFIX=loaduser

log() { printf 'devcluster-accounts: %s\n' "$*"; }
die() { printf 'devcluster-accounts: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (it creates users)"
[[ "$COUNT" =~ ^[0-9]+$ ]] && [ "$COUNT" -ge 1 ] && [ "$COUNT" -le 999 ] || die "COUNT is 1..999"
[ -d "$STATE/principals" ] || die "no dev cluster in $STATE; run make devcluster first"

users=()
made=0
for i in $(seq -f '%03g' 1 "$COUNT"); do
    user=$PREFIX$i
    users+=("$user")
    if ! id "$user" >/dev/null 2>&1; then
        # '*' (not '!'): no password login, but not "locked", which sshd would refuse.
        useradd --create-home --shell /bin/bash --password '*' "$user"
        made=$((made + 1))
    fi
    [ -d "/scratch/$user" ] || install -d -m 755 -o "$user" -g "$user" "/scratch/$user"
    [ -f "$STATE/principals/$user" ] || { printf '%s\n' "$user" > "$STATE/principals/$user"; chmod 644 "$STATE/principals/$user"; }
done
[ "$made" = 0 ] || log "created $made cluster users"

# Associations, in one sacctmgr call for those accounting does not know yet.
known=$(sacctmgr -n -P list user format=user 2>/dev/null || true)
missing=()
for user in "${users[@]}"; do
    grep -qx "$user" <<< "$known" || missing+=("$user")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "adding ${#missing[@]} users to accounting"
    sacctmgr -i add user "name=$(IFS=,; echo "${missing[*]}")" account=portal >/dev/null
fi
log "$COUNT accounts ready (${PREFIX}001..${users[-1]})"
