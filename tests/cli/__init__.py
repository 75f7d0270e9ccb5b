"""The read-only commands and the README's commands as written."""
