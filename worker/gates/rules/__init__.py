"""Ribbit's Semgrep ruleset (YAML files, one per family); a package so wheels ship it."""
