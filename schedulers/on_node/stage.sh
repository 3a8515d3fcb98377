# Stage-in and stage-out of a portal job (the portal's README, "Stage-in"). Written to
# $PORTAL_WORK_DIR/lib/portal_stage.sh by the job script and run as
#   portal_stage.sh manifest       on the first node: the checksums of the folder's files
#   portal_stage.sh copy           on every node: the folder into $PORTAL_STAGED_DIR, then
#                                  checked against the manifest (else: nothing runs)
#   portal_stage.sh out PATTERN... on the first node, after the command: what matches, in
#                                  the staged copy (else the work directory), copied to
#                                  $PORTAL_STAGE_DEST
#   portal_stage.sh clean          on every node: the staged copy removed
# The copy is $PORTAL_STAGED_DIR, ".../portal-stage-<job>-<scheduler's job>/data": the
# folder above it is this job's alone (mode 700), whatever the modes copied with the data,
# so that no one else on the node reads what the shared file system keeps private.
# Its values come from the job script's environment (PORTAL_STAGE_*, PORTAL_STAGED_DIR),
# never from its text. Paths are shown with printf %q: a name with a newline or an escape
# sequence cannot forge a line of the log.
set -u
umask 077
_action=${1:-}
shift || true
_node=${SLURMD_NODENAME:-$(hostname -s)}
_top=${PORTAL_STAGED_DIR%/*}

shown() { printf '%q' "$1"; }

fail() {
    echo "portal: stage-in failed on $_node: $*" >&2
    exit 1
}

# "ROOT PATH": no folder of PATH below ROOT is a symbolic link (the root itself may be one,
# as in the file manager): the folder the person chose is the one read or written.
no_link_below() {
    local root=$1 path=$2 rest at part
    case $path in
    "$root") return 0 ;;
    "$root"/*) rest=${path#"$root"/} ;;
    *) return 1 ;;
    esac
    at=$root
    while [ -n "$rest" ]; do
        part=${rest%%/*}
        if [ "$part" = "$rest" ]; then rest=; else rest=${rest#*/}; fi
        at=$at/$part
        [ -L "$at" ] && return 1
    done
    return 0
}

# A folder's contents, writable again (a dataset is often read-only) and removed.
remove() {
    [ -e "$1" ] || return 0
    chmod -R u+w -- "$1" 2>/dev/null
    rm -rf -- "$1"
}

make_manifest() {
    local src=$PORTAL_STAGE_SOURCE real target odd count
    no_link_below "$PORTAL_STAGE_SOURCE_ROOT" "$src" ||
        fail "a folder on the way to $(shown "$src") is a symbolic link: refused"
    [ -d "$src" ] || fail "$(shown "$src") is not a folder"
    cd -- "$src" || fail "cannot enter $(shown "$src")"
    real=$(pwd -P)
    # Links are copied as links: only those that stay inside the folder.
    while IFS= read -r -d '' target; do
        case $target in
        "$real" | "$real"/*) ;;
        *) fail "a link in $(shown "$src") points outside it (to $(shown "$target")): refused" ;;
        esac
    done < <(find . -type l -print0 | xargs -0 -r realpath -m -z --)
    odd=$(find . ! -type f ! -type d ! -type l -print0 | head -zn1 | tr -d '\0')
    [ -z "$odd" ] || fail "$(shown "$src/${odd#./}") is not a file, folder or link (a FIFO, socket or device): refused"
    # sha256sum escapes a name with a newline or a backslash, and -c reads it back.
    find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum -- > "$PORTAL_STAGE_MANIFEST.part" ||
        fail "could not read every file of $(shown "$src")"
    mv -f -- "$PORTAL_STAGE_MANIFEST.part" "$PORTAL_STAGE_MANIFEST" || fail "cannot write the manifest"
    count=$(wc -l < "$PORTAL_STAGE_MANIFEST")
    echo "portal: stage-in: $count file(s) of $(shown "$src"), checksums in $(shown "$PORTAL_STAGE_MANIFEST")"
}

copy_in() {
    local dest=$PORTAL_STAGED_DIR src=$PORTAL_STAGE_SOURCE scratch=${PORTAL_STAGE_SCRATCH:-}
    case $scratch in
    /*) ;;
    *) fail "no node-local scratch folder here (the cluster's node scratch is $(shown "${PORTAL_STAGE_SCRATCH_FROM:-}"), empty on this node)" ;;
    esac
    [ -d "$scratch" ] && [ -w "$scratch" ] || fail "the node-local scratch $(shown "$scratch") is not a folder this job may write to"
    remove "$_top"  # left by an earlier attempt of this job on this node
    mkdir -m 700 -- "$_top" && mkdir -- "$dest" || fail "cannot make $(shown "$dest")"
    [ -n "$src" ] || return 0  # outputs only: an empty folder on the node
    # The source is read by path once more: a link put on the way since the manifest is refused.
    no_link_below "$PORTAL_STAGE_SOURCE_ROOT" "$src" ||
        fail "a folder on the way to $(shown "$src") is a symbolic link: refused"
    local started=$SECONDS
    if command -v rsync > /dev/null 2>&1; then
        rsync -a -- "$src/" "$dest/" || fail "rsync could not copy $(shown "$src") to $(shown "$dest")"
    else
        cp -a -- "$src/." "$dest/" || fail "cp could not copy $(shown "$src") to $(shown "$dest")"
    fi
    cd -- "$dest" || fail "cannot enter $(shown "$dest")"
    # (An empty folder has an empty manifest, which sha256sum -c refuses to read.)
    if [ -s "$PORTAL_STAGE_MANIFEST" ] && ! sha256sum --quiet --strict -c -- "$PORTAL_STAGE_MANIFEST" >&2; then
        fail "the copy in $(shown "$dest") does not match the manifest of $(shown "$src") (the lines above name the files): the folder changed during the copy or the copy is damaged; the command was not run"
    fi
    local files listed
    files=$(find . -type f -printf . | wc -c)
    listed=$(wc -l < "$PORTAL_STAGE_MANIFEST")
    [ "$files" = "$listed" ] ||
        fail "the copy in $(shown "$dest") has $files file(s), its manifest $listed: the folder changed during the copy; the command was not run"
    echo "portal: stage-in: $listed file(s) copied to $(shown "$dest") on $_node in $((SECONDS - started)) s, checksums match"
}

# PATTERN's matches in the current folder into the caller's array ``matches``: expanded
# unsplit (IFS empty), never run; a name without wildcards stays as it is.
expand() {
    local IFS=
    # shellcheck disable=SC2206
    matches=($1)
}

copy_out() {
    local dest=$PORTAL_STAGE_DEST status=0 pattern base match found copied=0
    local -a matches
    no_link_below "$PORTAL_STAGE_DEST_ROOT" "$dest" ||
        { echo "portal: stage-out: a folder on the way to $(shown "$dest") is a symbolic link: nothing copied" >&2; return 1; }
    mkdir -p -- "$dest" || { echo "portal: stage-out: cannot make $(shown "$dest")" >&2; return 1; }
    shopt -s nullglob globstar
    shopt -s globskipdots 2> /dev/null  # bash 5.2: .* never matches . or ..
    for pattern in "$@"; do
        found=
        for base in "$PORTAL_STAGED_DIR" "$PORTAL_WORK_DIR"; do
            cd -- "$base" 2> /dev/null || continue
            expand "$pattern"
            for match in "${matches[@]}"; do
                case /$match/ in */../* | */./*) continue ;; esac
                [ -e "$match" ] || [ -L "$match" ] || continue
                found=1
                # Already where it goes: the work directory is the destination.
                [ "$base" = "$PORTAL_WORK_DIR" ] && [ "$dest" = "$PORTAL_WORK_DIR" ] && continue
                if cp -a --parents -- "$match" "$dest/"; then
                    copied=$((copied + 1))
                else
                    echo "portal: stage-out: could not copy $(shown "$match") to $(shown "$dest")" >&2
                    status=1
                fi
            done
            [ -n "$found" ] && break
        done
        [ -n "$found" ] || echo "portal: stage-out: nothing matches $(shown "$pattern") in the staged folder or the work directory" >&2
    done
    echo "portal: stage-out: $copied path(s) copied to $(shown "$dest")"
    return "$status"
}

case $_action in
manifest) make_manifest ;;
copy) copy_in ;;
out) copy_out "$@" ;;
clean) remove "$_top" ;;
*)
    echo "portal_stage.sh: unknown action $(shown "$_action")" >&2
    exit 2
    ;;
esac
