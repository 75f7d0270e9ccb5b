"""The package's shape: layers, imports, the pure core, the test markers."""
