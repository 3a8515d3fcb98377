# TensorBoard: the runs under ${logdir}, on a port chosen free on this node. TensorBoard
# has no authentication of its own, so it runs inside serve_tensorboard.py, which
# refuses every request without this session's secret (the portal's proxy adds it):
# other users of the node who find the port get nothing. No data server is started
# (--load_fast=false), so there is no second port to find.
rm -f connection.json connection.json.tmp
_portal_port=$$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])') \
    || { echo "portal: python3 is needed on the node to pick a free port" >&2; exit 1; }
_portal_secret=$$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
export PORTAL_SESSION_PORT=$$_portal_port PORTAL_SESSION_TOKEN=$$_portal_secret
export PORTAL_REGISTER_URL=${register_url}
mkdir -p -- ${logdir}
# The Python that has TensorBoard: the interpreter of the image's `tensorboard` command.
_portal_tb=$$(${launch} sh -c 'command -v tensorboard') \
    || { echo "portal: this image has no tensorboard command" >&2; exit 1; }
_portal_tb_python=$$(${launch} head -n 1 "$$_portal_tb" | sed -n 's/^#![[:space:]]*//p')
case "$$_portal_tb_python" in
    /*python*) ;;
    *) echo "portal: cannot tell which Python runs $$_portal_tb ($$_portal_tb_python)" >&2; exit 1 ;;
esac
cat > serve_tensorboard.py <<'PORTAL_TENSORBOARD'
${serve_script}PORTAL_TENSORBOARD
${launch} $$_portal_tb_python serve_tensorboard.py ${logdir} "$$_portal_port" &
_portal_child=$$!
${register}wait "$$_portal_child"
exit $$?
