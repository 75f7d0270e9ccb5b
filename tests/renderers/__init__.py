"""Renderers and sources: Helm, Kustomize, Jsonnet, SOPS, public content."""
