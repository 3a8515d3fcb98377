# TensorBoard: the runs under ${logdir}, on a port chosen free on this node. TensorBoard
# has no authentication of its own, so it runs inside serve_tensorboard.py, which
# refuses every request without this session's secret (the portal's proxy adds it):
# other users of the node who find the port get nothing. No data server is started
# (--load_fast=false), so there is no second port to find.
${session_start}mkdir -p -- ${logdir}
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
