# Sourced by deploy/devcluster/up.sh and deploy/condorpool/up.sh (root; `die` defined there).
#
# trust_portal_ca TRUSTED PRINCIPALS_DIR CLUSTER USER...: an sshd that accepts certificates signed by
# the portal's CA (clusters in certificate mode). TRUSTED is its TrustedUserCAKeys file:
# the lines of the file PORTAL_SSH_CA_PUB names (make devcluster / make condorpool pass the
# portal's) are added, none dropped (removing an old CA after a rotation is an admin's
# edit; tests add and remove their own CAs under the same flock). PRINCIPALS_DIR gets one
# file per USER naming only that user (AuthorizedPrincipalsFile): USER for the portal's own
# certificates, USER@CLUSTER for a person's own (clusters/certs.py), so a certificate
# for one user is refused for every other, and a person's for every other cluster.
trust_portal_ca() {
    local trusted=$1 principals=$2 cluster=$3 user line
    shift 3
    install -d -m 755 "$principals"
    for user in "$@"; do
        printf '%s\n%s@%s\n' "$user" "$user" "$cluster" > "$principals/$user"
        chmod 644 "$principals/$user"
    done
    touch "$trusted"; chmod 644 "$trusted"
    [ -n "${PORTAL_SSH_CA_PUB:-}" ] || return 0
    [ -r "$PORTAL_SSH_CA_PUB" ] || die "PORTAL_SSH_CA_PUB=$PORTAL_SSH_CA_PUB cannot be read"
    (   flock 9
        while IFS= read -r line; do
            [ -n "$line" ] || continue
            grep -qxF "$line" "$trusted" || printf '%s\n' "$line" >> "$trusted"
        done < "$PORTAL_SSH_CA_PUB"
    ) 9>>"$trusted"
}
