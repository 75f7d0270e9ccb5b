"""Helpers the tests share (one of each): see the contributor docs' test layout."""
