"""The file manager: browse, upload (tus), download, rclone transfers."""
