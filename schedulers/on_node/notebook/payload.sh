# Notebook: JupyterLab on the session's port, with its secret as Jupyter's token.
${session_start}export JUPYTER_PORT=$$_portal_port JUPYTER_TOKEN=$$_portal_secret
# JupyterLab opens in the user's home (or scratch), or the folder they chose in it: what
# they save there is there in the next session; this job's own files stay in the hidden
# .portal directory.
mkdir -p -- ${notebook_root}
# No "Would you like to get notified about official Jupyter news?" on every session, and no
# calls to the internet for news or updates: JupyterLab's own settings say "never" by
# default, through a default_setting_overrides.json of this job's own. JUPYTER_CONFIG_PATH
# adds it in front of the user's ~/.jupyter and the image's settings and hides neither;
# what the user chose in Settings > Notifications still wins.
mkdir -p jupyter-config/labconfig
echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' \
    > jupyter-config/labconfig/default_setting_overrides.json
# JupyterLab writes the server's token into every page it serves; behind the portal's
# proxy, which adds it to every request, the browser needs none, so pages carry none
# (the token would otherwise work on this node's port, around the proxy, until the end).
cat > jupyter-config/jupyter_server_config.py <<'PORTAL_JUPYTER_CONFIG'
def _portal_no_token(handler, page_config):
    page_config["token"] = ""
    return page_config


c.ServerApp.tornado_settings.update({"page_config_hook": _portal_no_token})
PORTAL_JUPYTER_CONFIG
export JUPYTER_CONFIG_PATH="$$PORTAL_WORK_DIR/jupyter-config$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}"
# port_retries=0: on the port chosen, or not at all (never on one someone else picked).
${launch} jupyter lab --no-browser --ip=0.0.0.0 --ServerApp.port_retries=0 --ServerApp.root_dir=${notebook_root} &
_portal_child=$$!
${register}wait "$$_portal_child"
exit $$?
