"""Environment modules (Lmod or Environment Modules) in a non-interactive shell: shared by
the job script (jobscript.py) and the catalog's check on a login node (image_check.py),
neither of which reads the login profile. Fixed text, no models: the check imports it
without the job script's dependencies."""

# Defines `module` in a non-interactive shell (batch scripts and the image check do not
# read the login profile): Lmod's or Environment Modules' bash init, whichever is there.
MODULE_INIT = """if ! command -v module >/dev/null 2>&1; then
    for f in /etc/profile.d/lmod.sh /etc/profile.d/modules.sh /usr/share/lmod/lmod/init/bash; do
        [ -r "$f" ] && . "$f" && break
    done
fi"""
