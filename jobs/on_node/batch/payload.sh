# Batch: the user's command, run by bash as written (inside the container, if any).
${launch} bash -c ${command} &
_portal_child=$$!
wait "$$_portal_child"
_portal_status=$$?
echo "portal: command exited with status $$_portal_status"
exit "$$_portal_status"
