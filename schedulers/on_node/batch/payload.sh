# Batch: the user's command, run by bash as written (inside the container, if any).
${launch} bash -c ${command} &
_portal_child=$$!
_portal_wait_child
_portal_finish
