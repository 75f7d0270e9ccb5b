"""What whoever can commit cannot do (docs/security.md)."""
