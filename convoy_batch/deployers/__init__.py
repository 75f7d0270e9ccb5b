"""Deployers: where rendered objects go (SPEC 12). One protocol, two implementations."""

from convoy_batch.deployers.base import Deployer, Manifest

__all__ = ["Deployer", "Manifest"]
