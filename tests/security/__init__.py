"""What whoever can commit cannot do (docs/reference/security.md)."""
